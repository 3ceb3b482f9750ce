// SplitElements: cuts the elements of a JSON array (the bytes after its '[') into parts that
// start exactly where a serial reading finds an element, using several threads, so that the
// parts can then be parsed on every core.
//
// How: part i (i > 0) guesses its start from the byte offset size*i/parts, syncing forward to
// the first '{' whose previous significant byte is ',', '[', '}' or a line break (the rule the
// event reader resumes by). Such a guess can be wrong: the '{' may be inside a string
// ("a,{b") or inside a nested object. Each thread then walks whole elements (strings, escapes
// and nesting matched, see SkipValue) from its guess up to the next part's guess and notes
// where it lands. The guesses are validated in order afterwards: part 0 starts at a real
// element; a part whose start is real lands on real elements, so its landing is the next
// part's real start. When that landing differs from the next guess (the guess was inside a
// value) the next part's walk is redone from the real start. The result is therefore always a
// subset of the serial reading's element starts, whatever the input; a bad guess only costs a
// serial re-walk of one part.
//
// Elements are separated by commas and JSON space (several commas tolerated, as the reader
// does). The walk stops at the array's closing ']', at the first malformed element (its start
// is then `end`: the serial reader reports and resyncs from there) or at an element cut by the
// end of the bytes (likewise).
// Thread safety: pure; it starts and joins its own threads.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace tracedb::query::json {

struct ElementCuts {
  // Offsets of the parts' first elements, ascending; starts[0] is the first element (or `end`
  // when there is none). Adjacent parts may be merged, so there are at most `parts` of them.
  std::vector<size_t> starts;
  // Where the walk stopped: the closing ']', the first malformed or cut element, or the size.
  // Every byte of [starts[k], starts[k+1]) and [starts.back(), end) is whole elements (and
  // separators).
  size_t end = 0;
  bool closed = false;  // `end` is the array's ']'
  size_t rewalks = 0;   // parts whose guessed start was wrong and had to be walked again
};

// The first '{' at or after `from` whose previous significant byte (spaces and tabs skipped) is
// ',', '[', '}' or a line break: a likely, not certain, element start. The size when none.
size_t GuessElementStart(std::string_view elements, size_t from);

// `elements` is the text after an array's '['. `parts` >= 1; 1 walks on the calling thread.
ElementCuts SplitElements(std::string_view elements, size_t parts);

}  // namespace tracedb::query::json
