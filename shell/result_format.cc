// Result formatting. See result_format.h.
#include "shell/result_format.h"

#include <algorithm>
#include <vector>

#include "engine/util/json_text.h"
#include "query/export/csv_text.h"
#include "query/export/json_rows.h"

namespace tracedb::shell {
namespace {

// Writes `s` whole: a value may hold a NUL byte (a name from a file), which fputs and "%s"
// would stop at.
void Put(const std::string& s, FILE* out) { std::fwrite(s.data(), 1, s.size(), out); }

std::string CellText(const engine::Stmt& st, int col, const std::string& null_value = "") {
  switch (st.ColumnType(col)) {
    case SQLITE_NULL:
      return null_value;
    case SQLITE_INTEGER:
      return std::to_string(st.Int(col));
    case SQLITE_FLOAT:  // exact: the shortest form that reads back to the same double
      return engine::json::DoubleText(st.Double(col));
    case SQLITE_BLOB:
      return "<blob " + std::to_string(st.Blob(col).size()) + " bytes>";
    default:
      return std::string(st.Text(col));
  }
}

std::string CsvField(const std::string& s) { return query::csv::Field(s); }

// Display width in terminal columns (UTF-8 code points; good enough for trace names).
size_t Width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

}  // namespace

const char* const kOutputFormatNames = "table, box, line, csv, json, markdown";

const char* OutputFormatName(OutputFormat f) {
  switch (f) {
    case OutputFormat::kTable:
      return "table";
    case OutputFormat::kCsv:
      return "csv";
    case OutputFormat::kJson:
      return "json";
    case OutputFormat::kMarkdown:
      return "markdown";
    case OutputFormat::kBox:
      return "box";
    case OutputFormat::kLine:
      return "line";
  }
  return "?";
}

bool ParseOutputFormat(std::string_view s, OutputFormat* out) {
  if (s == "table" || s == "column")
    *out = OutputFormat::kTable;
  else if (s == "box")
    *out = OutputFormat::kBox;
  else if (s == "line")
    *out = OutputFormat::kLine;
  else if (s == "csv")
    *out = OutputFormat::kCsv;
  else if (s == "json")
    *out = OutputFormat::kJson;
  else if (s == "markdown" || s == "md")
    *out = OutputFormat::kMarkdown;
  else
    return false;
  return true;
}

StatusOr<uint64_t> PrintRows(engine::Stmt* st, const PrintOptions& options, FILE* out) {
  const OutputFormat format = options.format;
  const std::string& null_value = options.null_value;
  const int ncol = st->ColumnCount();
  std::vector<std::string> names;
  for (int i = 0; i < ncol; ++i) names.emplace_back(st->ColumnName(i) ? st->ColumnName(i) : "");
  uint64_t rows = 0;
  if (format == OutputFormat::kCsv || format == OutputFormat::kJson) {
    // Streamed: constant memory for any number of rows.
    if (format == OutputFormat::kCsv && ncol > 0 && options.headers) {
      for (int i = 0; i < ncol; ++i) {
        if (i) std::fputc(',', out);
        Put(CsvField(names[i]), out);
      }
      std::fputc('\n', out);
    }
    if (format == OutputFormat::kJson) std::fputs("[", out);
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st->Step());
      if (!row) break;
      if (format == OutputFormat::kCsv) {
        std::string line;
        for (int i = 0; i < ncol; ++i) {
          if (i) line += ',';
          line += CsvField(CellText(*st, i, null_value));
        }
        line += '\n';
        Put(line, out);
      } else {
        std::string obj = rows ? ",\n{" : "\n{";
        for (int i = 0; i < ncol; ++i) {
          if (i) obj += ", ";
          engine::json::AppendString(&obj, names[i]);
          obj += ": ";
          query::json::AppendColumn(&obj, *st, i);
        }
        obj += "}";
        Put(obj, out);
      }
      ++rows;
    }
    if (format == OutputFormat::kJson) std::fputs(rows ? "\n]\n" : "]\n", out);
    return rows;
  }
  if (format == OutputFormat::kLine) {  // streamed, names right-aligned to the longest
    size_t name_width = 0;
    for (const std::string& n : names) name_width = std::max(name_width, Width(n));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st->Step());
      if (!row) break;
      std::string text = rows ? "\n" : "";
      for (int i = 0; i < ncol; ++i) {
        text += std::string(name_width - Width(names[i]), ' ') + names[i] + " = " +
                CellText(*st, i, null_value) + "\n";
      }
      Put(text, out);
      ++rows;
    }
    return rows;
  }
  // Table, box and Markdown need column widths: collect the rows first.
  std::vector<std::vector<std::string>> cells;
  std::vector<bool> numeric(static_cast<size_t>(ncol), true);
  for (;;) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, st->Step());
    if (!row) break;
    std::vector<std::string> r;
    for (int i = 0; i < ncol; ++i) {
      const int t = st->ColumnType(i);
      if (t != SQLITE_INTEGER && t != SQLITE_FLOAT && t != SQLITE_NULL) numeric[i] = false;
      r.push_back(CellText(*st, i, null_value));
    }
    cells.push_back(std::move(r));
  }
  if (ncol == 0) return uint64_t{0};
  std::vector<size_t> w(static_cast<size_t>(ncol));
  const bool headers = options.headers || format == OutputFormat::kMarkdown;
  for (int i = 0; i < ncol; ++i) {
    w[i] =
        std::max<size_t>(headers ? Width(names[i]) : 0, format == OutputFormat::kMarkdown ? 3 : 1);
    if (format != OutputFormat::kMarkdown && static_cast<size_t>(i) < options.widths.size() &&
        options.widths[i] > 0) {
      w[i] = std::max(w[i], static_cast<size_t>(options.widths[i]));
    }
  }
  for (const auto& r : cells) {
    for (int i = 0; i < ncol; ++i) w[i] = std::max(w[i], Width(r[i]));
  }
  auto pad = [&](const std::string& s, int i) {
    const std::string fill(w[i] - Width(s), ' ');
    return numeric[i] ? fill + s : s + fill;
  };
  std::string text;
  if (format == OutputFormat::kMarkdown) {
    text += "|";
    for (int i = 0; i < ncol; ++i) text += " " + pad(names[i], i) + " |";
    text += "\n|";
    for (int i = 0; i < ncol; ++i) {
      text += " " + std::string(w[i] - 1, '-') + (numeric[i] ? ":" : "-") + " |";
    }
    text += "\n";
    for (const auto& r : cells) {
      text += "|";
      for (int i = 0; i < ncol; ++i) {
        std::string v = r[i];
        size_t p = 0;
        while ((p = v.find('|', p)) != std::string::npos) {
          v.insert(p, "\\");
          p += 2;
        }
        text += " " + pad(v, i) + " |";
      }
      text += "\n";
    }
  } else if (format == OutputFormat::kBox) {
    auto rule = [&](const char* left, const char* mid, const char* right) {
      text += left;
      for (int i = 0; i < ncol; ++i) {
        if (i) text += mid;
        for (size_t k = 0; k < w[i] + 2; ++k) text += "\u2500";  // ─
      }
      text += right;
      text += "\n";
    };
    auto line = [&](const std::vector<std::string>& r) {
      text += "\u2502";  // │
      for (int i = 0; i < ncol; ++i) text += " " + pad(r[i], i) + " \u2502";
      text += "\n";
    };
    rule("\u250c", "\u252c", "\u2510");  // ┌ ┬ ┐
    if (headers) {
      line(names);
      rule("\u251c", "\u253c", "\u2524");  // ├ ┼ ┤
    }
    for (const auto& r : cells) line(r);
    rule("\u2514", "\u2534", "\u2518");  // └ ┴ ┘
  } else {
    if (headers) {
      for (int i = 0; i < ncol; ++i) text += (i ? "  " : "") + pad(names[i], i);
      text += "\n";
      for (int i = 0; i < ncol; ++i) text += (i ? "  " : "") + std::string(w[i], '-');
      text += "\n";
    }
    for (const auto& r : cells) {
      for (int i = 0; i < ncol; ++i) text += (i ? "  " : "") + pad(r[i], i);
      text += "\n";
    }
  }
  Put(text, out);
  return static_cast<uint64_t>(cells.size());
}

}  // namespace tracedb::shell
