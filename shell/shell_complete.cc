// Tab completion. See shell_complete.h.
#include "shell/shell_complete.h"

#include <editline/readline.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <set>

namespace tracedb::shell {
namespace {

engine::Db* g_db = nullptr;

const char* const kDotCommands[] = {".dump",      ".exit",   ".headers", ".help",  ".mode",
                                    ".nullvalue", ".output", ".pager",   ".quit",  ".read",
                                    ".schema",    ".show",   ".tables",  ".timer", ".width"};

const char* const kKeywords[] = {
    "ABS",    "ALL",    "AND",    "AS",     "ASC",     "AVG",       "BETWEEN",  "BY",
    "CASE",   "CAST",   "COUNT",  "CREATE", "DELETE",  "DESC",      "DISTINCT", "DROP",
    "ELSE",   "END",    "EXCEPT", "EXISTS", "EXPLAIN", "FROM",      "GLOB",     "GROUP",
    "HAVING", "IN",     "INDEX",  "INNER",  "INSERT",  "INTERSECT", "INTO",     "IS",
    "JOIN",   "LEFT",   "LIKE",   "LIMIT",  "MAX",     "MIN",       "NOT",      "NULL",
    "OFFSET", "ON",     "OR",     "ORDER",  "OVER",    "PARTITION", "PRAGMA",   "QUERY",
    "PLAN",   "SELECT", "SET",    "SUM",    "TABLE",   "THEN",      "UNION",    "UPDATE",
    "USING",  "VALUES", "VIEW",   "WHEN",   "WHERE",   "WINDOW",    "WITH"};

// Case-insensitive prefix test.
bool HasPrefix(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && strncasecmp(s.data(), prefix.data(), prefix.size()) == 0;
}

void AddQuery(engine::Db* db, const std::string& sql, const std::string& word,
              std::set<std::string>* out) {
  auto st = db->Prepare(sql);
  if (!st.ok()) return;
  for (;;) {
    auto row = st->Step();
    if (!row.ok() || !*row) return;
    std::string name(st->Text(0));
    if (HasPrefix(name, word)) out->insert(std::move(name));
  }
}

char* Generator(const char* text, int state) {
  static std::vector<std::string> matches;
  static size_t next = 0;
  if (state == 0) {
    const std::string line(rl_line_buffer ? rl_line_buffer : "");
    const std::string word(text);
    const size_t pos = line.rfind(word);
    matches = CompletionCandidates(g_db, line.substr(0, pos == std::string::npos ? 0 : pos), word);
    next = 0;
  }
  if (next >= matches.size()) return nullptr;
  return strdup(matches[next++].c_str());  // libedit frees it
}

char** Complete(const char* text, int, int) {
  rl_attempted_completion_over = 1;  // never fall back to file names
  return rl_completion_matches(text, Generator);
}

}  // namespace

std::vector<std::string> CompletionCandidates(engine::Db* db, const std::string& line_start,
                                              const std::string& word) {
  std::set<std::string> out;
  const size_t first = line_start.find_first_not_of(" \t");
  if (first == std::string::npos && !word.empty() && word[0] == '.') {
    for (const char* c : kDotCommands) {
      if (HasPrefix(c, word)) out.insert(c);
    }
    return {out.begin(), out.end()};
  }
  if (first != std::string::npos && line_start[first] == '.') {
    // Arguments of dot-commands: modes, on/off, and table names for .schema and .dump.
    const std::string cmd =
        line_start.substr(first, line_start.find_first_of(" \t", first) - first);
    if (cmd == ".mode") {
      for (const char* m : {"table", "box", "line", "csv", "json", "markdown"}) {
        if (HasPrefix(m, word)) out.insert(m);
      }
      return {out.begin(), out.end()};
    }
    if (cmd == ".headers" || cmd == ".timer" || cmd == ".pager") {
      for (const char* m : {"on", "off"}) {
        if (HasPrefix(m, word)) out.insert(m);
      }
      return {out.begin(), out.end()};
    }
    if (cmd != ".schema" && cmd != ".dump") return {};
  } else {
    for (const char* k : kKeywords) {
      if (HasPrefix(k, word)) {
        // Keywords in the case the user started typing them in.
        std::string s = k;
        if (!word.empty() && std::islower(static_cast<unsigned char>(word[0]))) {
          for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        }
        out.insert(s);
      }
    }
  }
  if (db == nullptr) return {out.begin(), out.end()};
  const char* kSchemaNames =
      "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') UNION "
      "SELECT name FROM sqlite_temp_master WHERE type IN ('table', 'view') UNION "
      "SELECT 'events'";
  AddQuery(db, kSchemaNames, word, &out);
  if (first != std::string::npos && line_start[first] == '.') return {out.begin(), out.end()};
  AddQuery(db,
           std::string("SELECT DISTINCT c.name FROM (") + kSchemaNames +
               ") AS t, pragma_table_info(t.name) AS c",
           word, &out);
  AddQuery(db, "SELECT DISTINCT name FROM pragma_function_list", word, &out);
  return {out.begin(), out.end()};
}

void InstallCompletion(engine::Db* db) {
  g_db = db;
  rl_attempted_completion_function = db ? Complete : nullptr;
  // '.' is part of a dot-command; quotes and operators separate words.
  static const char kBreaks[] = " \t\n\"'`@$><=;|&{(,)*+-/%";
  rl_basic_word_break_characters = kBreaks;
}

}  // namespace tracedb::shell
