// The `chrome` importer. See chrome_importer.h.
#include "query/import/chrome/chrome_importer.h"

#include "query/import/chrome/chrome_core.h"
#include "query/import/import_common.h"

namespace tracedb::query {
namespace {

class GenericFlavor : public chrome::ChromeFlavor {
 public:
  const char* format() const override { return "chrome"; }
};

class ChromeImporter : public Importer {
 public:
  const char* name() const override { return "chrome"; }

  int Detect(std::string_view path, std::string_view head) const override {
    const size_t first = head.find_first_not_of(" \t\r\n\xef\xbb\xbf");
    if (first == std::string_view::npos || (head[first] != '[' && head[first] != '{')) return 0;
    // tracedb's own export says so in otherData.
    if (head.find("\"otherData\"") != std::string_view::npos &&
        head.find("\"tracedb\": true") != std::string_view::npos) {
      return 95;
    }
    if (head.find("\"ph\"") != std::string_view::npos) return 20;
    if (head.find("\"traceEvents\"") != std::string_view::npos) return 20;
    return 0;
  }

  Status Import(const ImportInput& input, engine::TraceWriter* writer,
                ImportResult* result) override {
    return chrome::ImportChromeInput(input, GenericFlavor(), writer, result);
  }
};

}  // namespace

std::unique_ptr<Importer> NewChromeImporter() { return std::make_unique<ChromeImporter>(); }

}  // namespace tracedb::query
