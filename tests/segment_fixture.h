// Writes segment files from a small text description, so that compaction can be tested on
// exactly known input (diff tests, clock tests). One line per item; '#' starts a comment:
//
//   file DIR RANK PID SEQ [host=H] [world=N]   start a segment file DIR/rank-R/seg-PID-SEQ.tds
//   anchor REALTIME_NS CLOCK_NS [unc=N]        an ANCHOR block
//   sync REF_RANK LOCAL_NS OFFSET_NS UNC_NS    a SYNC block
//   string ID TEXT...                          a STRINGS entry (TEXT may contain spaces)
//   thread INDEX OS_TID [NAME...]              a THREADS entry
//   lane ID NAME_STRING_ID                     a LANES entry
//   comm ID SIZE RANK_IN_COMM [MEMBERS,...]    a COMMS entry
//   events THREAD_INDEX                        start an EVENTS block
//   B|E|I TS NAME_ID [cat=C] [lane=L] [bytes=N] [peer=N] [tag=N] [comm=N] [seq=N] [flow=N]
//   X TS DUR NAME_ID [...]                     complete event
//   C TS NAME_ID VALUE [...]                   counter
//   S TS STEP                                  step marker
//   drop THREAD_INDEX N                        a STATS block
//   stepstat STEP START DUR COMPUTE COMM WAIT BYTES EVENTS [NAME_ID:NS...]
//                                              a STEPSTATS block of one step
//   end                                        an END block (the file was closed)
//
// Thread safety: none needed.
#pragma once

#include <string>

#include "engine/util/status.h"

namespace tracedb::testing {

// Writes the files `spec` describes; DIR in `file` lines is relative to `root`.
Status WriteSegmentsFromSpec(const std::string& root, const std::string& spec);

}  // namespace tracedb::testing
