/* mingw: -municode -static */
/*
 * ort_host: one long-lived process running models on onnxruntime.dll's DirectML execution provider
 * through onnxruntime's public C API (API version 12), for the `ort-dml` backend off Windows (under
 * Wine) and on Windows alike. onnxruntime.dll is loaded at run time from the folder of this exe, so
 * the build needs only onnxruntime's C API headers.
 *
 * Framing, both directions: u32 little-endian length, then the payload. A request's first byte is
 * its command; integers are little-endian; a "blob" is a u32 length and that many bytes.
 *   'V'  -> status, blob version, blob providers (comma-separated)
 *   'C'  source kind u8 (0 model bytes, 1 a path), blob model, i32 optimization level (-1: default),
 *        i32 intra-op threads (-1: default), u32 n, n x (blob key, blob value) session config entries,
 *        blob optimized_model_filepath (empty: none), u8 append DML
 *        -> status, u32 session id, inputs, outputs (u32 n, n x (blob name, i32 type, u32 rank,
 *           rank x i64 dims (-1: symbolic))), blob log
 *   'R'  u32 session id, u32 n feeds, n x (blob name, i32 type, u32 rank, rank x i64 dims, blob data),
 *        u32 m, m x blob output name
 *        -> status, u32 m, m x (i32 type, u32 rank, rank x i64 dims, blob data), blob log
 *   'X'  u32 session id -> status, blob log
 * status: u8 0 ok; 1 session creation failed, 2 run failed, 3 bad request; after a non-zero status
 * come blob message and blob log. The log is everything onnxruntime logged since the last reply
 * (VERBOSE while a session is created: its node placements), as "severity|category|message" lines.
 * Before reading anything the host writes its hello frame: "ok onnxruntime V, ..." once a NonZero model
 * ran on the DirectML EP with the known answer, else "failed: why" (then every 'C' and 'R' is refused:
 * a Vulkan driver without descriptor indexing gives S_OK everywhere and zeros).
 */
#include <windows.h>
#include <fcntl.h>
#include <io.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <specstrings.h>
/* mingw's specstrings.h lacks some of the SAL annotations onnxruntime's header uses: they mean nothing to gcc */
#ifndef _Check_return_
#define _Check_return_
#endif
#ifndef _Frees_ptr_opt_
#define _Frees_ptr_opt_
#endif
#ifndef _In_
#define _In_
#endif
#ifndef _In_opt_
#define _In_opt_
#endif
#ifndef _In_opt_z_
#define _In_opt_z_
#endif
#ifndef _In_z_
#define _In_z_
#endif
#ifndef _Inout_
#define _Inout_
#endif
#ifndef _Inout_opt_
#define _Inout_opt_
#endif
#ifndef _Out_
#define _Out_
#endif
#ifndef _Out_opt_
#define _Out_opt_
#endif
#ifndef _Outptr_
#define _Outptr_
#endif
#ifndef _Outptr_result_maybenull_
#define _Outptr_result_maybenull_
#endif
#ifndef _Ret_maybenull_
#define _Ret_maybenull_
#endif
#ifndef _Ret_notnull_
#define _Ret_notnull_
#endif
#ifndef _In_reads_
#define _In_reads_(x)
#endif
#ifndef _Inout_updates_all_
#define _Inout_updates_all_(x)
#endif
#ifndef _Out_writes_all_
#define _Out_writes_all_(x)
#endif
#ifndef _Out_writes_bytes_all_
#define _Out_writes_bytes_all_(x)
#endif
#ifndef _Outptr_result_buffer_maybenull_
#define _Outptr_result_buffer_maybenull_(x)
#endif
#ifndef _Return_type_success_
#define _Return_type_success_(x)
#endif
#ifndef _Success_
#define _Success_(x)
#endif
/* the header spells the calling convention _stdcall, which -std=c11 does not define */
#ifndef _stdcall
#define _stdcall __stdcall
#endif
#include "onnxruntime_c_api.h"

#define MAX_SESSIONS 256
#define EMPTY_VALUE (-2)     /* the element type of an output onnxruntime left empty (ort_host.py) */
#define LOG_LIMIT (32u << 20)          /* a log past this is cut, saying so */

typedef OrtStatus *(ORT_API_CALL *AppendDmlFn)(OrtSessionOptions *, int);

static const OrtApi *ort;
static const OrtApiBase *ort_base;
static AppendDmlFn append_dml;
static OrtEnv *env;
static OrtSession *sessions[MAX_SESSIONS];
static const char *refusal = "";        /* why the self-test failed: every session is refused */

/* ---- growable byte buffers ---------------------------------------------------------------- */
typedef struct { unsigned char *data; size_t len, cap; } Buf;

static void buf_put(Buf *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        b->data = realloc(b->data, cap);
        if (!b->data) { fputs("ort_host: out of memory\n", stderr); exit(3); }
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
}
static void put_u8(Buf *b, unsigned v) { unsigned char c = (unsigned char)v; buf_put(b, &c, 1); }
static void put_u32(Buf *b, uint32_t v) { buf_put(b, &v, 4); }
static void put_i64(Buf *b, int64_t v) { buf_put(b, &v, 8); }
static void put_blob(Buf *b, const void *p, size_t n) { put_u32(b, (uint32_t)n); buf_put(b, p, n); }
static void put_str(Buf *b, const char *s) { put_blob(b, s, strlen(s)); }

/* ---- the log onnxruntime writes through our logger ---------------------------------------- */
static Buf log_buf;
static CRITICAL_SECTION log_lock;
static int log_cut;

static void ORT_API_CALL on_log(void *param, OrtLoggingLevel severity, const char *category,
                                const char *logid, const char *location, const char *message) {
    (void)param; (void)logid; (void)location;
    EnterCriticalSection(&log_lock);
    size_t n = strlen(message) + strlen(category) + 8;
    if (log_buf.len + n <= LOG_LIMIT) {
        char head[8];
        snprintf(head, sizeof head, "%d|", (int)severity);
        buf_put(&log_buf, head, strlen(head));
        buf_put(&log_buf, category, strlen(category));
        buf_put(&log_buf, "|", 1);
        buf_put(&log_buf, message, strlen(message));
        buf_put(&log_buf, "\n", 1);
    } else if (!log_cut) {
        log_cut = 1;
        const char *cut = "3|ort_host|the log passed its limit and was cut here\n";
        buf_put(&log_buf, cut, strlen(cut));
    }
    LeaveCriticalSection(&log_lock);
}

static void put_log(Buf *out) {
    EnterCriticalSection(&log_lock);
    put_blob(out, log_buf.data, log_buf.len);
    log_buf.len = 0;
    log_cut = 0;
    LeaveCriticalSection(&log_lock);
}

/* ---- request reading: a cursor that fails the request instead of reading past its end ------ */
typedef struct { const unsigned char *p; size_t left; int bad; } Cursor;

static const void *take(Cursor *c, size_t n) {
    if (c->bad || n > c->left) { c->bad = 1; return NULL; }
    const void *p = c->p;
    c->p += n;
    c->left -= n;
    return p;
}
static uint32_t get_u32(Cursor *c) { uint32_t v = 0; const void *p = take(c, 4); if (p) memcpy(&v, p, 4); return v; }
static int32_t get_i32(Cursor *c) { return (int32_t)get_u32(c); }
static int64_t get_i64(Cursor *c) { int64_t v = 0; const void *p = take(c, 8); if (p) memcpy(&v, p, 8); return v; }
static unsigned get_u8(Cursor *c) { const unsigned char *p = take(c, 1); return p ? *p : 0; }
static const char *get_blob(Cursor *c, uint32_t *len) { *len = get_u32(c); return take(c, *len); }

/* A NUL-terminated copy of a blob (names, paths, config entries). */
static char *get_string(Cursor *c) {
    uint32_t n;
    const char *p = get_blob(c, &n);
    char *s = malloc((size_t)n + 1);
    if (!s) { fputs("ort_host: out of memory\n", stderr); exit(3); }
    if (p) memcpy(s, p, n);
    s[p ? n : 0] = 0;
    return s;
}

static wchar_t *widen(const char *utf8) {
    int n = MultiByteToWideChar(CP_UTF8, 0, utf8, -1, NULL, 0);
    wchar_t *w = malloc(sizeof(wchar_t) * (size_t)(n > 0 ? n : 1));
    if (!w) { fputs("ort_host: out of memory\n", stderr); exit(3); }
    if (n <= 0 || !MultiByteToWideChar(CP_UTF8, 0, utf8, -1, w, n)) w[0] = 0;
    return w;
}

/* ---- replies -------------------------------------------------------------------------------- */
static void fail(Buf *out, unsigned status, const char *message) {
    out->len = 0;
    put_u8(out, status);
    put_str(out, message);
    put_log(out);
}

/* Takes the status: 0 when ok, else the failure reply is written with onnxruntime's message. */
static int failed(OrtStatus *status, Buf *out, unsigned code, const char *what) {
    if (!status) return 0;
    char message[4096];
    snprintf(message, sizeof message, "%s%s", what, ort->GetErrorMessage(status));
    ort->ReleaseStatus(status);
    fail(out, code, message);
    return 1;
}

/* ---- element types -------------------------------------------------------------------------- */
/* Bytes of `count` elements of ONNX type `type`; 0 with *ok = 0 for a type not carried (strings). */
static size_t type_bytes(int type, size_t count, int *ok) {
    *ok = 1;
    switch (type) {
    case 2: case 3: case 9: case 17: case 18: case 19: case 20: return count;     /* u8 i8 bool f8 */
    case 4: case 5: case 10: case 16: return count * 2;                          /* u16 i16 f16 bf16 */
    case 1: case 6: case 12: return count * 4;                                   /* f32 i32 u32 */
    case 7: case 11: case 13: case 14: return count * 8;                         /* i64 f64 u64 c64 */
    case 15: return count * 16;                                                  /* c128 */
    case 21: case 22: return (count + 1) / 2;                                    /* u4 i4 */
    default: *ok = 0; return 0;
    }
}

/* ---- 'C': a session ------------------------------------------------------------------------- */
static void put_value_infos(Buf *out, OrtSession *s, int outputs) {
    OrtAllocator *alloc;
    size_t n = 0;
    OrtStatus *st = ort->GetAllocatorWithDefaultOptions(&alloc);
    if (st) { ort->ReleaseStatus(st); put_u32(out, 0); return; }
    st = outputs ? ort->SessionGetOutputCount(s, &n) : ort->SessionGetInputCount(s, &n);
    if (st) { ort->ReleaseStatus(st); n = 0; }
    put_u32(out, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        char *name = NULL;
        OrtTypeInfo *info = NULL;
        const OrtTensorTypeAndShapeInfo *tensor = NULL;
        enum ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
        size_t rank = 0;
        int64_t dims[64];
        st = outputs ? ort->SessionGetOutputName(s, i, alloc, &name) : ort->SessionGetInputName(s, i, alloc, &name);
        if (st) { ort->ReleaseStatus(st); name = NULL; }
        put_str(out, name ? name : "");
        if (name) alloc->Free(alloc, name);
        st = outputs ? ort->SessionGetOutputTypeInfo(s, i, &info) : ort->SessionGetInputTypeInfo(s, i, &info);
        if (!st) st = ort->CastTypeInfoToTensorInfo(info, &tensor);
        if (!st && tensor) st = ort->GetTensorElementType(tensor, &type);
        if (!st && tensor) st = ort->GetDimensionsCount(tensor, &rank);
        if (rank > 64) rank = 64;
        if (!st && tensor) st = ort->GetDimensions(tensor, dims, rank);
        if (st) { ort->ReleaseStatus(st); rank = 0; }
        put_u32(out, (uint32_t)(tensor ? (int)type : -1));   /* -1: not a tensor (a sequence or map) */
        put_u32(out, (uint32_t)rank);
        for (size_t d = 0; d < rank; d++) put_i64(out, dims[d]);
        if (info) ort->ReleaseTypeInfo(info);
    }
}

static OrtStatus *configure(OrtSessionOptions *opts, Cursor *c, int *use_dml) {
    int level = get_i32(c), threads = get_i32(c);
    OrtStatus *st = NULL;
    if (level >= 0) st = ort->SetSessionGraphOptimizationLevel(opts, (GraphOptimizationLevel)level);
    if (!st && threads >= 0) st = ort->SetIntraOpNumThreads(opts, threads);
    uint32_t entries = get_u32(c);
    for (uint32_t i = 0; i < entries && !c->bad; i++) {
        char *key = get_string(c), *value = get_string(c);
        if (!st) st = ort->AddSessionConfigEntry(opts, key, value);
        free(key);
        free(value);
    }
    char *optimized = get_string(c);
    if (!st && optimized[0]) {
        wchar_t *w = widen(optimized);
        st = ort->SetOptimizedModelFilePath(opts, w);
        free(w);
    }
    free(optimized);
    *use_dml = (int)get_u8(c);
    /* the session's own log at VERBOSE: the node placements are logged there */
    if (!st) st = ort->SetSessionLogSeverityLevel(opts, ORT_LOGGING_LEVEL_VERBOSE);
    if (!st && *use_dml) {
        /* DirectML requires sequential execution and no memory pattern */
        st = ort->DisableMemPattern(opts);
        if (!st) st = ort->SetSessionExecutionMode(opts, ORT_SEQUENTIAL);
        if (!st) st = append_dml(opts, 0);
    }
    return st;
}

static void create_session(Cursor *c, Buf *out) {
    unsigned kind = get_u8(c);
    uint32_t model_len;
    const char *model = get_blob(c, &model_len);
    OrtSessionOptions *opts = NULL;
    int use_dml = 0, slot = -1;
    OrtStatus *st = ort->CreateSessionOptions(&opts);
    if (!st) st = configure(opts, c, &use_dml);
    if (c->bad) { if (st) ort->ReleaseStatus(st); ort->ReleaseSessionOptions(opts); fail(out, 3, "malformed create request"); return; }
    for (int i = 0; i < MAX_SESSIONS; i++) if (!sessions[i]) { slot = i; break; }
    if (!st && slot < 0) { ort->ReleaseSessionOptions(opts); fail(out, 1, "ort_host holds too many sessions"); return; }
    OrtSession *session = NULL;
    if (!st && kind == 1) {
        char *path = malloc((size_t)model_len + 1);
        memcpy(path, model, model_len);
        path[model_len] = 0;
        wchar_t *w = widen(path);
        st = ort->CreateSession(env, w, opts, &session);
        free(w);
        free(path);
    } else if (!st) {
        st = ort->CreateSessionFromArray(env, model, model_len, opts, &session);
    }
    ort->ReleaseSessionOptions(opts);
    if (failed(st, out, 1, "")) return;
    sessions[slot] = session;
    put_u8(out, 0);
    put_u32(out, (uint32_t)slot);
    put_value_infos(out, session, 0);
    put_value_infos(out, session, 1);
    put_log(out);
}

/* ---- 'R': a run ----------------------------------------------------------------------------- */
typedef struct { char **names; OrtValue **values; size_t n; } Values;

static void release_values(Values *v) {
    for (size_t i = 0; i < v->n; i++) {
        free(v->names[i]);
        if (v->values[i]) ort->ReleaseValue(v->values[i]);
    }
    free(v->names);
    free(v->values);
}

static OrtStatus *read_feeds(Cursor *c, Values *feeds, const OrtMemoryInfo *mem, char *why, size_t why_len) {
    feeds->n = get_u32(c);
    if (feeds->n > c->left) { c->bad = 1; feeds->n = 0; return NULL; }
    feeds->names = calloc(feeds->n + 1, sizeof(char *));
    feeds->values = calloc(feeds->n + 1, sizeof(OrtValue *));
    for (size_t i = 0; i < feeds->n; i++) {
        feeds->names[i] = get_string(c);
        int type = get_i32(c), ok;
        uint32_t rank = get_u32(c);
        if (rank > 64) { c->bad = 1; return NULL; }
        int64_t dims[64];
        size_t count = 1;
        for (uint32_t d = 0; d < rank; d++) { dims[d] = get_i64(c); count *= (size_t)(dims[d] < 0 ? 0 : dims[d]); }
        uint32_t len;
        const char *data = get_blob(c, &len);
        if (c->bad) return NULL;
        size_t want = type_bytes(type, count, &ok);
        if (!ok || want != len) {
            if (ok)
                snprintf(why, why_len, "input %s: %u bytes given for %zu elements of type %d", feeds->names[i],
                         len, count, type);
            else
                snprintf(why, why_len, "input %s: type %d is not carried by ort_host (strings are not)",
                         feeds->names[i], type);
            return NULL;
        }
        /* the data stays in the request buffer until the run returns; a zero-size tensor still
           needs a non-null pointer */
        static char empty[16];
        OrtStatus *st = ort->CreateTensorWithDataAsOrtValue(mem, len ? (void *)data : (void *)empty, len,
                                                            dims, rank, (ONNXTensorElementDataType)type,
                                                            &feeds->values[i]);
        if (st) return st;
    }
    return NULL;
}

static const char *value_kind(enum ONNXType kind) {
    switch (kind) {
    case ONNX_TYPE_SEQUENCE: return "a sequence";
    case ONNX_TYPE_MAP: return "a map";
    case ONNX_TYPE_OPAQUE: return "an opaque value";
    case ONNX_TYPE_SPARSETENSOR: return "a sparse tensor";
    case ONNX_TYPE_OPTIONAL: return "an optional";
    default: return "a value of no kind onnxruntime names";
    }
}

static int put_output(Buf *out, OrtValue *value, const char *name, char *why, size_t why_len) {
    int is_tensor = 0;
    OrtTensorTypeAndShapeInfo *info = NULL;
    enum ONNXTensorElementDataType type;
    size_t rank = 0, count = 0;
    int64_t dims[64];
    void *data = NULL;
    enum ONNXType kind = ONNX_TYPE_UNKNOWN;
    if (value) {
        OrtStatus *kst = ort->GetValueType(value, &kind);
        if (kst) { ort->ReleaseStatus(kst); kind = ONNX_TYPE_UNKNOWN; }
    }
    if (kind == ONNX_TYPE_UNKNOWN) {
        /* a run onnxruntime called successful left this output empty (an OrtValue holding nothing):
           said as EMPTY_VALUE, no dims, no data (ort_host.py), the run's other outputs still sent */
        put_u32(out, (uint32_t)EMPTY_VALUE);
        put_u32(out, 0);
        put_blob(out, "", 0);
        return 1;
    }
    OrtStatus *st = ort->IsTensor(value, &is_tensor);
    if (st) {
        snprintf(why, why_len, "output %s: %s", name, ort->GetErrorMessage(st));
        ort->ReleaseStatus(st);
        return 0;
    }
    if (!is_tensor) {
        snprintf(why, why_len, "output %s is %s, not a tensor (not carried by ort_host)", name, value_kind(kind));
        return 0;
    }
    st = ort->GetTensorTypeAndShape(value, &info);
    if (!st) st = ort->GetTensorElementType(info, &type);
    if (!st) st = ort->GetDimensionsCount(info, &rank);
    if (!st && rank > 64) { snprintf(why, why_len, "output %s has rank %zu", name, rank); ort->ReleaseTensorTypeAndShapeInfo(info); return 0; }
    if (!st) st = ort->GetDimensions(info, dims, rank);
    if (!st) st = ort->GetTensorShapeElementCount(info, &count);
    if (info) ort->ReleaseTensorTypeAndShapeInfo(info);
    int ok = 0;
    size_t bytes = st ? 0 : type_bytes((int)type, count, &ok);
    if (!st && !ok) { snprintf(why, why_len, "output %s has type %d, not carried by ort_host (strings are not)", name, (int)type); return 0; }
    if (!st && bytes) st = ort->GetTensorMutableData(value, &data);
    if (st) { snprintf(why, why_len, "output %s: %s", name, ort->GetErrorMessage(st)); ort->ReleaseStatus(st); return 0; }
    put_u32(out, (uint32_t)type);
    put_u32(out, (uint32_t)rank);
    for (size_t d = 0; d < rank; d++) put_i64(out, dims[d]);
    put_blob(out, data, bytes);
    return 1;
}

static void run_session(Cursor *c, Buf *out) {
    uint32_t id = get_u32(c);
    char why[4096] = "";
    Values feeds = {0}, outs = {0};
    OrtMemoryInfo *mem = NULL;
    OrtRunOptions *run = NULL;
    if (id >= MAX_SESSIONS || !sessions[id]) { fail(out, 3, "no such session"); return; }
    OrtStatus *st = ort->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &mem);
    if (!st) st = read_feeds(c, &feeds, mem, why, sizeof why);
    if (!st && !why[0] && !c->bad) {
        outs.n = get_u32(c);
        if (outs.n > c->left) { c->bad = 1; outs.n = 0; }
        outs.names = calloc(outs.n + 1, sizeof(char *));
        outs.values = calloc(outs.n + 1, sizeof(OrtValue *));
        for (size_t i = 0; i < outs.n; i++) outs.names[i] = get_string(c);
    }
    if (!st && !why[0] && !c->bad) {
        st = ort->CreateRunOptions(&run);
        /* a run logs warnings and errors, not a line per kernel */
        if (!st) st = ort->RunOptionsSetRunLogSeverityLevel(run, ORT_LOGGING_LEVEL_WARNING);
        if (!st) st = ort->Run(sessions[id], run, (const char *const *)feeds.names, (const OrtValue *const *)feeds.values,
                               feeds.n, (const char *const *)outs.names, outs.n, outs.values);
    }
    if (st) failed(st, out, 2, "");
    else if (c->bad) fail(out, 3, "malformed run request");
    else if (why[0]) fail(out, 2, why);
    else {
        put_u8(out, 0);
        put_u32(out, (uint32_t)outs.n);
        for (size_t i = 0; i < outs.n && !why[0]; i++) put_output(out, outs.values[i], outs.names[i], why, sizeof why);
        if (why[0]) fail(out, 2, why);
        else put_log(out);
    }
    if (run) ort->ReleaseRunOptions(run);
    release_values(&feeds);
    release_values(&outs);
    if (mem) ort->ReleaseMemoryInfo(mem);
}

static void version(Buf *out) {
    char **names = NULL;
    int count = 0;
    Buf list = {0};
    OrtStatus *st = ort->GetAvailableProviders(&names, &count);
    if (failed(st, out, 3, "")) return;
    for (int i = 0; i < count; i++) {
        if (i) buf_put(&list, ",", 1);
        buf_put(&list, names[i], strlen(names[i]));
    }
    st = ort->ReleaseAvailableProviders(names, count);
    if (st) ort->ReleaseStatus(st);
    put_u8(out, 0);
    put_str(out, ort_base->GetVersionString());
    put_blob(out, list.data, list.len);
    free(list.data);
}

static void handle(const unsigned char *req, size_t len, Buf *out) {
    Cursor c = {req + 1, len ? len - 1 : 0, len == 0};
    out->len = 0;
    switch (len ? req[0] : 0) {
    case 'V': version(out); break;
    case 'C': if (refusal[0]) fail(out, 3, refusal); else create_session(&c, out); break;
    case 'R': if (refusal[0]) fail(out, 3, refusal); else run_session(&c, out); break;
    case 'X': {
        uint32_t id = get_u32(&c);
        if (c.bad || id >= MAX_SESSIONS || !sessions[id]) { fail(out, 3, "no such session"); break; }
        ort->ReleaseSession(sessions[id]);
        sessions[id] = NULL;
        put_u8(out, 0);
        put_log(out);
        break;
    }
    default: fail(out, 3, "unknown request");
    }
}

/* ---- start-up and the pipe loop ------------------------------------------------------------- */
static int load_onnxruntime(char *why, size_t why_len) {
    HMODULE dll = LoadLibraryW(L"onnxruntime.dll");
    if (!dll) { snprintf(why, why_len, "failed: cannot load onnxruntime.dll (error %lu)", GetLastError()); return 0; }
    const OrtApiBase *(ORT_API_CALL *get_base)(void) = (const OrtApiBase *(ORT_API_CALL *)(void))(void *)
        GetProcAddress(dll, "OrtGetApiBase");
    append_dml = (AppendDmlFn)(void *)GetProcAddress(dll, "OrtSessionOptionsAppendExecutionProvider_DML");
    if (!get_base || !append_dml) { snprintf(why, why_len, "failed: onnxruntime.dll exports no OrtGetApiBase or DirectML provider"); return 0; }
    ort_base = get_base();
    ort = ort_base->GetApi(ORT_API_VERSION);
    if (!ort) { snprintf(why, why_len, "failed: onnxruntime %s does not serve C API version %d", ort_base->GetVersionString(), ORT_API_VERSION); return 0; }
    InitializeCriticalSection(&log_lock);
    OrtStatus *st = ort->CreateEnvWithCustomLogger(on_log, NULL, ORT_LOGGING_LEVEL_VERBOSE, "ort_host", &env);
    if (st) { snprintf(why, why_len, "failed: CreateEnv: %s", ort->GetErrorMessage(st)); return 0; }
    return 1;
}

static int read_all(void *p, size_t n) {
    return fread(p, 1, n, stdin) == n;
}

static int serve(void) {
    Buf out = {0};
    for (;;) {
        uint32_t len;
        if (!read_all(&len, 4)) return 0;               /* the parent closed the pipe: done */
        unsigned char *req = malloc(len ? len : 1);
        if (!req || !read_all(req, len)) { fputs("ort_host: truncated request\n", stderr); return 3; }
        handle(req, len, &out);
        free(req);
        uint32_t n = (uint32_t)out.len;
        if (fwrite(&n, 4, 1, stdout) != 1 || fwrite(out.data, 1, out.len, stdout) != out.len || fflush(stdout)) return 0;
    }
}

/* NonZero over a float [2, 3] input x, output y (opset 13), serialised by onnx.helper. */
static const unsigned char SELF_TEST_MODEL[] = {
    0x08, 0x08, 0x12, 0x08, 0x6f, 0x72, 0x74, 0x5f, 0x68, 0x6f, 0x73, 0x74, 0x3a, 0x47, 0x0a, 0x13,
    0x0a, 0x01, 0x78, 0x12, 0x01, 0x79, 0x1a, 0x02, 0x6e, 0x7a, 0x22, 0x07, 0x4e, 0x6f, 0x6e, 0x5a,
    0x65, 0x72, 0x6f, 0x12, 0x08, 0x73, 0x65, 0x6c, 0x66, 0x74, 0x65, 0x73, 0x74, 0x5a, 0x13, 0x0a,
    0x01, 0x78, 0x12, 0x0e, 0x0a, 0x0c, 0x08, 0x01, 0x12, 0x08, 0x0a, 0x02, 0x08, 0x02, 0x0a, 0x02,
    0x08, 0x03, 0x62, 0x11, 0x0a, 0x01, 0x79, 0x12, 0x0c, 0x0a, 0x0a, 0x08, 0x07, 0x12, 0x06, 0x0a,
    0x02, 0x08, 0x02, 0x0a, 0x00, 0x42, 0x04, 0x0a, 0x00, 0x10, 0x0d
};

/* The known answer: the NonZero model on the DirectML EP. Returns "" when right, else why not. */
static const char *self_test(void) {
    static char why[4200];
    Buf req = {0}, out = {0};
    put_u8(&req, 'C');
    put_u8(&req, 0);
    put_blob(&req, SELF_TEST_MODEL, sizeof SELF_TEST_MODEL);
    put_u32(&req, (uint32_t)-1); put_u32(&req, (uint32_t)-1); put_u32(&req, 0);
    put_str(&req, "");
    put_u8(&req, 1);
    handle(req.data, req.len, &out);
    if (out.len < 5 || out.data[0] != 0) {
        uint32_t n = 0;
        if (out.len >= 5) memcpy(&n, out.data + 1, 4);
        snprintf(why, sizeof why, "the self-test session failed: %.*s", (int)(n < out.len - 5 ? n : 0), out.data + 5);
        return why;
    }
    uint32_t id;
    memcpy(&id, out.data + 1, 4);
    /* the reply ends with the session's log: its placement lines must name the DirectML EP */
    int placed = 0;
    for (size_t i = 0; i + 20 <= out.len && !placed; i++) placed = !memcmp(out.data + i, "DmlExecutionProvider", 20);
    if (!placed) return "the self-test's NonZero node was not placed on DmlExecutionProvider";
    static const float x[6] = {0.0f, 1.5f, 0.0f, -2.0f, 0.0f, 3.0f};
    static const int64_t want[6] = {0, 1, 1, 1, 0, 2};
    req.len = 0;
    put_u8(&req, 'R'); put_u32(&req, id); put_u32(&req, 1);
    put_str(&req, "x"); put_u32(&req, 1); put_u32(&req, 2); put_i64(&req, 2); put_i64(&req, 3);
    put_blob(&req, x, sizeof x);
    put_u32(&req, 1); put_str(&req, "y");
    handle(req.data, req.len, &out);
    /* status, count, type, rank, dims[2], blob(48) */
    if (out.len < 1 + 4 + 4 + 4 + 16 + 4 + 48 || out.data[0] != 0) return "the self-test's NonZero run failed";
    int64_t dims[2];
    memcpy(dims, out.data + 13, 16);
    int right = dims[0] == 2 && dims[1] == 3 && !memcmp(out.data + 33, want, sizeof want);
    req.len = 0;
    put_u8(&req, 'X'); put_u32(&req, id);
    handle(req.data, req.len, &out);
    free(req.data);
    free(out.data);
    if (!right)
        return "NonZero on DmlExecutionProvider gave a wrong answer (a Vulkan driver without descriptor "
               "indexing, e.g. Mesa < 25 lavapipe, gives zeros)";
    return "";
}

static void write_frame(const void *data, uint32_t len) {
    if (fwrite(&len, 4, 1, stdout) == 1 && fwrite(data, 1, len, stdout) == len) fflush(stdout);
}

int wmain(void) {
    _setmode(_fileno(stdin), _O_BINARY);
    _setmode(_fileno(stdout), _O_BINARY);
    char hello[4400];
    if (!load_onnxruntime(hello, sizeof hello)) {
        write_frame(hello, (uint32_t)strlen(hello));
        return 2;
    }
    refusal = self_test();
    if (refusal[0]) snprintf(hello, sizeof hello, "failed: %s", refusal);
    else snprintf(hello, sizeof hello, "ok onnxruntime %s, NonZero on DmlExecutionProvider", ort_base->GetVersionString());
    write_frame(hello, (uint32_t)strlen(hello));
    return serve();
}
