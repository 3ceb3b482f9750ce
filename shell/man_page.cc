// The tracedb(1) manual page from the CLI11 definitions. See man_page.h.
#include "shell/man_page.h"

#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/util/version.h"
#include "shell/commands.h"

namespace tracedb::shell {
namespace {

// Text for roff: backslashes and hyphens escaped, and a line that would start with a control
// character ('.' or '\'') protected with \&.
std::string Roff(const std::string& text) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
    line_start = c == '\n';
  }
  return out;
}

std::string Bold(const std::string& s) { return "\\fB" + Roff(s) + "\\fR"; }
std::string Italic(const std::string& s) { return "\\fI" + Roff(s) + "\\fR"; }

bool Hidden(const CLI::Option* o) { return o->get_group().empty(); }
bool IsFlag(const CLI::Option* o) { return o->get_items_expected_max() == 0; }

// "VALUE" for an option's argument: CLI11's type name (TEXT, INT, FLOAT...), upper case, with
// CLI11's decorations (":{a,b}", " REQUIRED") left out.
std::string ValueName(const CLI::Option* o) {
  std::string t = o->get_type_name();
  const size_t cut = t.find_first_of(":[ ");
  if (cut != std::string::npos) t = t.substr(0, cut);
  if (t.empty()) t = "VALUE";
  return t;
}

// "-o, --output TEXT" for the .TP tag of an option.
std::string OptionTag(const CLI::Option* o) {
  std::string tag;
  for (const std::string& s : o->get_snames()) tag += (tag.empty() ? "" : ", ") + Bold("-" + s);
  for (const std::string& l : o->get_lnames()) tag += (tag.empty() ? "" : ", ") + Bold("--" + l);
  if (!IsFlag(o)) {
    tag += " " + Italic(ValueName(o));
    if (o->get_items_expected_max() > 1) tag += "...";
  }
  return tag;
}

// The subcommand's synopsis: "tracedb report mpi [OPTIONS] db".
std::string Synopsis(const std::vector<std::string>& path, const CLI::App& app) {
  std::string s = Bold("tracedb");
  for (const std::string& p : path) s += " " + Bold(p);
  bool has_options = false;
  for (const CLI::Option* o : app.get_options()) {
    if (o->nonpositional() && !Hidden(o) && o != app.get_help_ptr()) has_options = true;
  }
  if (has_options) s += " [" + Italic("OPTIONS") + "]";
  for (const CLI::Option* o : app.get_options()) {
    if (!o->get_positional() || o->nonpositional()) continue;
    std::string name = Italic(o->get_name(true));
    if (o->get_items_expected_max() > 1) name += "...";
    s += " " + (o->get_required() ? name : "[" + name + "]");
  }
  if (!app.get_subcommands([](const CLI::App*) { return true; }).empty()) {
    s += " " + Italic("SUBCOMMAND");
  }
  return s;
}

void Options(const CLI::App& app, std::string* out) {
  for (const CLI::Option* o : app.get_options()) {
    if (Hidden(o) || o == app.get_help_ptr()) continue;
    *out += ".TP\n";
    if (o->nonpositional()) {
      *out += OptionTag(o) + "\n";
    } else {
      *out += Italic(o->get_name(true)) + (o->get_required() ? "" : " (optional)") + "\n";
    }
    std::string desc = o->get_description();
    if (!o->get_default_str().empty()) desc += " (default: " + o->get_default_str() + ")";
    if (o->nonpositional() && o->get_required()) desc += " (required)";
    *out += Roff(desc) + "\n";
  }
}

void Subcommand(const std::vector<std::string>& path, const CLI::App& app, std::string* out) {
  std::string title = "tracedb";
  for (const std::string& p : path) title += " " + p;
  *out += ".SS \"" + Roff(title) + "\"\n";
  *out += Synopsis(path, app) + "\n.br\n";
  *out += Roff(app.get_description()) + "\n";
  Options(app, out);
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    std::vector<std::string> p = path;
    p.push_back(sub->get_name());
    Subcommand(p, *sub, out);
  }
}

}  // namespace

std::string ManPage(const CLI::App& app) {
  const std::string version = engine::kTracedbVersion;
  std::string out;
  out +=
      ".\\\" tracedb(1): written by `tracedb --help-man` (shell/man_page.cc) from the program's\n";
  out += ".\\\" own option definitions; do not edit by hand.\n";
  out += ".TH TRACEDB 1 \"\" \"tracedb " + version + "\" \"User Commands\"\n";
  out +=
      ".SH NAME\ntracedb \\- record, compact, query and export traces of distributed training "
      "jobs\n";
  out += ".SH SYNOPSIS\n" + Bold("tracedb") + " [" + Bold("-q") + "|" + Bold("-v") + "] " +
         Italic("SUBCOMMAND") + " [" + Italic("OPTIONS") + "] " + Italic("ARGS") + "...\n.br\n" +
         Bold("tracedb") + " " + Bold("--version") + "\n";
  std::string description = app.get_description();
  if (description.rfind("tracedb: ", 0) == 0) description = description.substr(9);
  if (!description.empty()) description[0] = static_cast<char>(std::toupper(description[0]));
  out += ".SH DESCRIPTION\n" + Roff(description + ".") + "\n.PP\n" +
         Roff(
             "Every subcommand prints its options with tracedb SUBCOMMAND --help. The user guide, "
             "the SQL reference and the cookbook are in the docs/ directory of the source tree "
             "(docs/index.md).") +
         "\n";
  out += ".SH OPTIONS\n";
  Options(app, &out);
  out += ".SH SUBCOMMANDS\n";
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    Subcommand({sub->get_name()}, *sub, &out);
  }
  out += ".SH EXIT STATUS\n";
  out += ".TP\n" + std::to_string(kExitOk) + "\n" + Roff("Done; also --help and --version.") + "\n";
  out += ".TP\n" + std::to_string(kExitError) + "\n" +
         Roff(
             "The work failed: a file missing or unreadable, corrupt input, an SQL error, a write "
             "error.") +
         "\n";
  out += ".TP\n" + std::to_string(kExitUsage) + "\n" +
         Roff(
             "Bad arguments: an unknown subcommand or option, a missing argument, a value out of "
             "range. The message is one line: tracedb SUBCOMMAND: what is wrong (see tracedb "
             "SUBCOMMAND --help).") +
         "\n";
  out += ".SH ENVIRONMENT\n";
  const std::pair<const char*, const char*> env[] = {
      {"TRACEDB_PROGRESS",
       "1: show the progress line of compact, import and export even when stderr is not a "
       "terminal; 0: never show it. -q hides it in any case."},
      {"TRACEDB_DIR", "The segment directory a program linked with the recorder writes into."},
      {"TRACEDB_LIB, TRACEDB_MPI_LIB, TRACEDB_NCCL_PLUGIN, TRACEDB_CUDA_LIB, TRACEDB_NVTX_LIB",
       "The libraries tracedb record injects (default: next to the program, or ../lib/tracedb/)."},
      {"PAGER", "The pager of tracedb shell (default: less -FRX)."},
  };
  for (const auto& [name, what] : env) out += ".TP\n" + Bold(name) + "\n" + Roff(what) + "\n";
  out += ".SH FILES\n.TP\n" + Italic("~/.tracedb_history") + "\n" +
         Roff("The history of tracedb shell.") + "\n";
  out += ".SH SEE ALSO\n" + Bold("sqlite3") + "(1)\n";
  return out;
}

void AddManPageFlag(CLI::App* app) {
  app->add_flag_callback(
         "--help-man",
         [app] {
           std::fputs(ManPage(*app).c_str(), stdout);
           throw CLI::Success();
         },
         "Print the manual page (roff) and exit")
      ->group("");  // hidden: the page documents the program, not itself
}

}  // namespace tracedb::shell
