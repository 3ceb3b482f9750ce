/* LTTng-UST tracepoint provider for the peer benchmark: a span is two events (begin, end)
 * carrying a 32-bit name id, as tracedb records it; on the Horovod-like workload (phase_*)
 * they also carry the lane (tensor) id and the category, as tracedb_begin_ex/end_ex do. */
#undef TRACEPOINT_PROVIDER
#define TRACEPOINT_PROVIDER tracedb_bench

#undef TRACEPOINT_INCLUDE
#define TRACEPOINT_INCLUDE "./lttng_tp.h"

#if !defined(TRACEDB_LTTNG_TP_H) || defined(TRACEPOINT_HEADER_MULTI_READ)
#define TRACEDB_LTTNG_TP_H

#include <lttng/tracepoint.h>

TRACEPOINT_EVENT(tracedb_bench, span_begin, TP_ARGS(uint32_t, name),
                 TP_FIELDS(ctf_integer(uint32_t, name, name)))
TRACEPOINT_EVENT(tracedb_bench, span_end, TP_ARGS(uint32_t, name),
                 TP_FIELDS(ctf_integer(uint32_t, name, name)))

TRACEPOINT_EVENT(tracedb_bench, phase_begin, TP_ARGS(uint32_t, name, uint32_t, lane, uint8_t, cat),
                 TP_FIELDS(ctf_integer(uint32_t, name, name) ctf_integer(uint32_t, lane, lane)
                               ctf_integer(uint8_t, cat, cat)))
TRACEPOINT_EVENT(tracedb_bench, phase_end, TP_ARGS(uint32_t, name, uint32_t, lane, uint8_t, cat),
                 TP_FIELDS(ctf_integer(uint32_t, name, name) ctf_integer(uint32_t, lane, lane)
                               ctf_integer(uint8_t, cat, cat)))

#endif /* TRACEDB_LTTNG_TP_H */

#include <lttng/tracepoint-event.h>
