// JSON output helpers. See json_out.h.
#include "shell/json_out.h"

#include "query/export/json_text.h"

namespace tracedb::shell {

void AppendJsonString(std::string* out, std::string_view s) { query::json::AppendString(out, s); }

}  // namespace tracedb::shell
