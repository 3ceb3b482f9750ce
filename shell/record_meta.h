// What `tracedb record` writes about how a run was made into the trace database's meta table
// (keys record.*): the command, the git revision of the working directory, the host, the
// working directory, the start time and a selection of the environment. `tracedb runs add`
// copies them into the run history. docs/check.md "What record captures".
#pragma once

#include <string>
#include <vector>

#include "engine/db/trace_writer.h"
#include "engine/util/status.h"

namespace tracedb::shell {

// Writes record.command, record.git_rev (absent outside a git work tree), record.host,
// record.cwd, record.started_at (unix seconds) and record.env (a JSON object of the variables
// that shape a run: NCCL_*, CUDA_*, OMP_*, OMPI_MCA_*, UCX_*, MKL_*, TORCH_*, PYTORCH_*,
// SLURM_JOB_*, TRACEDB_*; never one whose name says it holds a secret).
Status WriteRecordMeta(engine::TraceWriter* writer, const std::vector<std::string>& command,
                       double started_at);

}  // namespace tracedb::shell
