// Analyze(): the why analyses in order over one model. See why.h.
#include "query/analysis/why.h"

#include "query/analysis/why_internal.h"

namespace tracedb::query::analysis {

StatusOr<Analysis> Analyze(engine::Db* db, const Options& options) {
  auto model = internal::LoadModel(db);
  if (!model.ok()) return model.status();
  Analysis a;
  a.events = model->events;
  internal::ComputeWaits(*model, &a);
  internal::ComputeNameTimes(*model, &a);
  internal::ComputeCauses(*model, options, &a);
  internal::ComputePath(*model, &a);
  a.names = std::move(model->names);
  return a;
}

}  // namespace tracedb::query::analysis
