// The list of importers (importer.h): one line per format, in the order Detect() ties are
// broken. Thread safety: built once, on first use (thread-safe static initialisation); the
// importers are stateless.
#include "query/import/bluefog/bluefog_importer.h"
#include "query/import/byteps/byteps_importer.h"
#include "query/import/chrome/chrome_importer.h"
#include "query/import/horovod/horovod_importer.h"
#include "query/import/importer.h"
#include "query/import/kineto/kineto_importer.h"
#include "query/import/mpip/mpip_importer.h"
#include "query/import/mpitrace/mpitrace_importer.h"

namespace tracedb::query {

const std::vector<Importer*>& Importers() {
  static const std::unique_ptr<Importer> owned[] = {
      NewHorovodImporter(), NewBluefogImporter(),  NewBytepsImporter(), NewKinetoImporter(),
      NewChromeImporter(),  NewMpitraceImporter(), NewMpipImporter(),
  };
  static const std::vector<Importer*> list = [] {
    std::vector<Importer*> v;
    for (const auto& i : owned) v.push_back(i.get());
    return v;
  }();
  return list;
}

Importer* FindImporter(std::string_view name) {
  for (Importer* i : Importers()) {
    if (name == i->name()) return i;
  }
  return nullptr;
}

Importer* DetectImporter(std::string_view path, std::string_view head) {
  Importer* best = nullptr;
  int best_score = 0;
  for (Importer* i : Importers()) {
    const int score = i->Detect(path, head);
    if (score > best_score) {
      best = i;
      best_score = score;
    }
  }
  return best;
}

}  // namespace tracedb::query
