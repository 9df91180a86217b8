/*
 * zstd's tracing hooks, defined inside the library so that no one else's
 * are called.
 *
 * zstd built with GCC or Clang on ELF (ZSTD_TRACE, zstd/lib/common/zstd_trace.h)
 * calls ZSTD_trace_{,de}compress_{begin,end} when they are defined,
 * through weak references. Left undefined, those references bind to a
 * host's definitions, wherever the host defines them for its own zstd,
 * when the host links libdsh_session.a or loads libdsh_session.so; the
 * host's tracer would then be handed contexts of the library's zstd,
 * another version. These hidden definitions bind the references inside the
 * library: begin asks for no trace (0), so end is never called.
 */
typedef unsigned long long ZSTD_TraceCtx;
struct ZSTD_CCtx_s;
struct ZSTD_DCtx_s;

#define DSH_HIDDEN __attribute__((visibility("hidden")))

DSH_HIDDEN ZSTD_TraceCtx ZSTD_trace_compress_begin(const struct ZSTD_CCtx_s *cctx);
DSH_HIDDEN void ZSTD_trace_compress_end(ZSTD_TraceCtx ctx, const void *trace);
DSH_HIDDEN ZSTD_TraceCtx ZSTD_trace_decompress_begin(const struct ZSTD_DCtx_s *dctx);
DSH_HIDDEN void ZSTD_trace_decompress_end(ZSTD_TraceCtx ctx, const void *trace);

ZSTD_TraceCtx ZSTD_trace_compress_begin(const struct ZSTD_CCtx_s *cctx) {
  (void)cctx;
  return 0;
}

void ZSTD_trace_compress_end(ZSTD_TraceCtx ctx, const void *trace) {
  (void)ctx;
  (void)trace;
}

ZSTD_TraceCtx ZSTD_trace_decompress_begin(const struct ZSTD_DCtx_s *dctx) {
  (void)dctx;
  return 0;
}

void ZSTD_trace_decompress_end(ZSTD_TraceCtx ctx, const void *trace) {
  (void)ctx;
  (void)trace;
}
