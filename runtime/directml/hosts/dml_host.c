/* mingw: -ld3d12 -ldxgi -lversion -static */
/*
 * dml_host: Microsoft's DirectML.dll behind a pipe, for onnx-dml-lowering's `dml` backend.
 *
 * One long-lived process: one D3D12 device (the default adapter), one IDMLDevice at the highest
 * feature level DirectML.dll creates, one command queue / allocator / list, one shader-visible
 * descriptor heap. Frames on stdin and stdout are a u32 little-endian length and a payload; the
 * first frame written is the hello ("ok ..." or "failed: why"). Requests (little-endian):
 *
 *   EXECUTE (1): u32 operator type (DML_OPERATOR_TYPE), u32 slot count, per tensor slot (in the
 *     operator description's order, inputs first): u32 present, and if present u32 data type,
 *     u32 flags, u32 dimension count, u32 sizes[n], u32 has strides, [u32 strides[n]],
 *     u64 TotalTensorSizeInBytes, u32 GuaranteedBaseOffsetAlignment; u32 parameter bytes and
 *     the operator's scalar fields (see build_desc); then each present slot's buffer, exactly
 *     TotalTensorSizeInBytes bytes (an output's initial contents too, so the bytes DirectML
 *     leaves alone come back as they were sent).
 *     Answer: u32 0, u32 cache hit, then each output slot's whole buffer; or u32 1, u32 HRESULT,
 *     u32 stage length, the stage (CreateOperator, CompileOperator, ...) ; or u32 2 and a reason
 *     (refused: a malformed request, or the self-test failed).
 *   CAPS (2): answer u32 0 and the device facts as one JSON object.
 *
 * The DirectML API is declared here from Microsoft's public documentation of DirectML.h
 * (mingw-w64 has no DirectML.h); only what this host uses.
 */
#define COBJMACROS
#define WIN32_LEAN_AND_MEAN
#define INITGUID            /* the D3D12 interface ids are defined here: mingw has no import library of them */
#include <windows.h>
#include <d3d12.h>
#include <dxgi1_6.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the public DirectML API, as documented ------------------------------------------------- */
enum { DML_TENSOR_TYPE_BUFFER = 1 };
enum { DML_BINDING_TYPE_NONE = 0, DML_BINDING_TYPE_BUFFER = 1 };
enum { DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT = 0, DML_FEATURE_FEATURE_LEVELS = 1 };
enum {
    OP_ELEMENT_WISE_IDENTITY = 1, OP_DIAGONAL_MATRIX = 93, OP_ELEMENT_WISE_BIT_AND = 121,
    OP_ELEMENT_WISE_BIT_OR = 122, OP_NONZERO_COORDINATES = 133, OP_DIAGONAL_MATRIX1 = 163,
};
enum { DT_FLOAT32 = 1, DT_UINT32 = 3, DT_LAST = 13 };
#define MAX_DIMS 8
#define MAX_SLOTS 4

typedef struct { UINT DataType, Flags, DimensionCount; const UINT *Sizes, *Strides;
                 UINT64 TotalTensorSizeInBytes; UINT GuaranteedBaseOffsetAlignment; } DmlBufferTensorDesc;
typedef struct { UINT Type; const void *Desc; } DmlTensorDesc;
typedef struct { UINT Type; const void *Desc; } DmlOperatorDesc;
typedef union { BYTE Bytes[8]; INT64 Int64; double Float64; } DmlScalarUnion;
typedef struct { const DmlTensorDesc *Input, *Output; const void *ScaleBias; } DescIdentity;
typedef struct { const DmlTensorDesc *A, *B, *Output; } DescBinary;
typedef struct { const DmlTensorDesc *Output; INT Offset; FLOAT Value; } DescDiagonal;
typedef struct { const DmlTensorDesc *Input, *Output; UINT ValueDataType; DmlScalarUnion Value;
                 INT FillBegin, FillEnd; } DescDiagonal1;
typedef struct { const DmlTensorDesc *Input, *Count, *Coordinates; } DescNonZero;
typedef struct { UINT RequiredDescriptorCount; UINT64 TemporaryResourceSize, PersistentResourceSize; } DmlBindingProperties;
typedef struct { void *Dispatchable; D3D12_CPU_DESCRIPTOR_HANDLE Cpu; D3D12_GPU_DESCRIPTOR_HANDLE Gpu; UINT Size; } DmlBindingTableDesc;
typedef struct { UINT Type; const void *Desc; } DmlBindingDesc;
typedef struct { ID3D12Resource *Buffer; UINT64 Offset, SizeInBytes; } DmlBufferBinding;
typedef struct { UINT Count; const UINT *Levels; } DmlQueryFeatureLevels;

/* vtables: IUnknown, IDMLObject, then each interface's own methods in DirectML.h's order */
#define UNKNOWN_AND_OBJECT(T) \
    HRESULT (STDMETHODCALLTYPE *QueryInterface)(T *, REFIID, void **); \
    ULONG (STDMETHODCALLTYPE *AddRef)(T *); ULONG (STDMETHODCALLTYPE *Release)(T *); \
    void *GetPrivateData, *SetPrivateData, *SetPrivateDataInterface, *SetName;
typedef struct IDmlDevice IDmlDevice;
typedef struct IDmlChild IDmlChild;     /* operators, compiled operators, initializers */
typedef struct IDmlBindingTable IDmlBindingTable;
typedef struct IDmlRecorder IDmlRecorder;
struct IDmlDeviceVtbl { UNKNOWN_AND_OBJECT(IDmlDevice)
    HRESULT (STDMETHODCALLTYPE *CheckFeatureSupport)(IDmlDevice *, UINT, UINT, const void *, UINT, void *);
    HRESULT (STDMETHODCALLTYPE *CreateOperator)(IDmlDevice *, const DmlOperatorDesc *, REFIID, void **);
    HRESULT (STDMETHODCALLTYPE *CompileOperator)(IDmlDevice *, IDmlChild *, UINT, REFIID, void **);
    HRESULT (STDMETHODCALLTYPE *CreateOperatorInitializer)(IDmlDevice *, UINT, IDmlChild *const *, REFIID, void **);
    HRESULT (STDMETHODCALLTYPE *CreateCommandRecorder)(IDmlDevice *, REFIID, void **);
    HRESULT (STDMETHODCALLTYPE *CreateBindingTable)(IDmlDevice *, const DmlBindingTableDesc *, REFIID, void **);
    void *Evict, *MakeResident;
    HRESULT (STDMETHODCALLTYPE *GetDeviceRemovedReason)(IDmlDevice *);
    void *GetParentDevice; };
struct IDmlDevice { const struct IDmlDeviceVtbl *v; };
struct IDmlChildVtbl { UNKNOWN_AND_OBJECT(IDmlChild)
    void *GetDevice;                                              /* IDMLDeviceChild */
    DmlBindingProperties *(STDMETHODCALLTYPE *GetBindingProperties)(IDmlChild *, DmlBindingProperties *); };
struct IDmlChild { const struct IDmlChildVtbl *v; };
struct IDmlBindingTableVtbl { UNKNOWN_AND_OBJECT(IDmlBindingTable)
    void *GetDevice;
    void (STDMETHODCALLTYPE *BindInputs)(IDmlBindingTable *, UINT, const DmlBindingDesc *);
    void (STDMETHODCALLTYPE *BindOutputs)(IDmlBindingTable *, UINT, const DmlBindingDesc *);
    void (STDMETHODCALLTYPE *BindTemporaryResource)(IDmlBindingTable *, const DmlBindingDesc *);
    void (STDMETHODCALLTYPE *BindPersistentResource)(IDmlBindingTable *, const DmlBindingDesc *);
    void *Reset; };
struct IDmlBindingTable { const struct IDmlBindingTableVtbl *v; };
struct IDmlRecorderVtbl { UNKNOWN_AND_OBJECT(IDmlRecorder)
    void *GetDevice;
    void (STDMETHODCALLTYPE *RecordDispatch)(IDmlRecorder *, ID3D12CommandList *, IDmlChild *, IDmlBindingTable *); };
struct IDmlRecorder { const struct IDmlRecorderVtbl *v; };

static const GUID IID_Device = {0x6dbd6437, 0x96fd, 0x423f, {0xa9, 0x8c, 0xae, 0x5e, 0x7c, 0x2a, 0x57, 0x3f}};
static const GUID IID_Operator = {0x26caae7a, 0x3081, 0x4633, {0x95, 0x81, 0x22, 0x6f, 0xbe, 0x57, 0x69, 0x5d}};
static const GUID IID_Compiled = {0x6b15e56a, 0xbf5c, 0x4902, {0x92, 0xd8, 0xda, 0x3a, 0x65, 0x0a, 0xfe, 0xa4}};
static const GUID IID_Initializer = {0x427c1113, 0x435c, 0x469c, {0x86, 0x76, 0x4d, 0x5d, 0xd0, 0x72, 0xf8, 0x13}};
static const GUID IID_BindingTable = {0x29c687dc, 0xde74, 0x4e3b, {0xab, 0x00, 0x11, 0x68, 0xf2, 0xfc, 0x3c, 0xfc}};
static const GUID IID_Recorder = {0xe6857a76, 0x2e3e, 0x4fdd, {0xbf, 0xf4, 0x5d, 0x2b, 0xa1, 0x0f, 0xb4, 0x53}};
typedef HRESULT (WINAPI *CreateDevice1Fn)(ID3D12Device *, UINT, UINT, REFIID, void **);

static const UINT LEVELS[] = {0x6400, 0x6300, 0x6200, 0x6100, 0x6000, 0x5200, 0x5100, 0x5000,
                              0x4100, 0x4000, 0x3100, 0x3000, 0x2100, 0x2000, 0x1000};
static const char *TYPE_NAMES[DT_LAST + 1] = {"UNKNOWN", "FLOAT32", "FLOAT16", "UINT32", "UINT16", "UINT8",
    "INT32", "INT16", "INT8", "FLOAT64", "UINT64", "INT64", "UINT4", "INT4"};

/* ---- the device ---------------------------------------------------------------------------- */
#define HEAP_DESCRIPTORS 4096
static struct {
    ID3D12Device *d3d; ID3D12CommandQueue *queue; ID3D12CommandAllocator *allocator;
    ID3D12GraphicsCommandList *list; ID3D12Fence *fence; HANDLE event; UINT64 fence_value;
    ID3D12DescriptorHeap *heap; UINT descriptor_size;
    IDmlDevice *dml; IDmlRecorder *recorder; UINT feature_level;
    char version[64], adapter[256], self_test[512];
} G;

typedef struct { HRESULT hr; const char *stage; } Status;
#define OK_STATUS ((Status){S_OK, NULL})
#define CHECK(call, name) do { HRESULT hr_ = (call); if (FAILED(hr_)) return (Status){hr_, name}; } while (0)

static Status wait_idle(void) {
    CHECK(ID3D12CommandQueue_Signal(G.queue, G.fence, ++G.fence_value), "Signal");
    if (ID3D12Fence_GetCompletedValue(G.fence) < G.fence_value) {
        CHECK(ID3D12Fence_SetEventOnCompletion(G.fence, G.fence_value, G.event), "SetEventOnCompletion");
        if (WaitForSingleObject(G.event, 120000) != WAIT_OBJECT_0) return (Status){E_FAIL, "GPU wait (timeout)"};
    }
    CHECK(ID3D12Device_GetDeviceRemovedReason(G.d3d), "device removed");
    return OK_STATUS;
}

static Status submit(void) {
    CHECK(ID3D12GraphicsCommandList_Close(G.list), "Close");
    ID3D12CommandList *lists[] = {(ID3D12CommandList *)G.list};
    ID3D12CommandQueue_ExecuteCommandLists(G.queue, 1, lists);
    Status s = wait_idle();
    if (s.hr != S_OK) return s;
    CHECK(ID3D12CommandAllocator_Reset(G.allocator), "CommandAllocator Reset");
    CHECK(ID3D12GraphicsCommandList_Reset(G.list, G.allocator, NULL), "CommandList Reset");
    return OK_STATUS;
}

static Status make_buffer(UINT64 size, D3D12_HEAP_TYPE heap, ID3D12Resource **out) {
    D3D12_HEAP_PROPERTIES props = {heap, D3D12_CPU_PAGE_PROPERTY_UNKNOWN, D3D12_MEMORY_POOL_UNKNOWN, 1, 1};
    D3D12_RESOURCE_DESC desc = {D3D12_RESOURCE_DIMENSION_BUFFER, 0, size ? size : 4, 1, 1, 1, DXGI_FORMAT_UNKNOWN,
                                {1, 0}, D3D12_TEXTURE_LAYOUT_ROW_MAJOR,
                                heap == D3D12_HEAP_TYPE_DEFAULT ? D3D12_RESOURCE_FLAG_ALLOW_UNORDERED_ACCESS : D3D12_RESOURCE_FLAG_NONE};
    D3D12_RESOURCE_STATES state = heap == D3D12_HEAP_TYPE_UPLOAD ? D3D12_RESOURCE_STATE_GENERIC_READ
                                : heap == D3D12_HEAP_TYPE_READBACK ? D3D12_RESOURCE_STATE_COPY_DEST : D3D12_RESOURCE_STATE_COMMON;
    CHECK(ID3D12Device_CreateCommittedResource(G.d3d, &props, D3D12_HEAP_FLAG_NONE, &desc, state, NULL,
                                               &IID_ID3D12Resource, (void **)out), "CreateCommittedResource");
    return OK_STATUS;
}

static void transition(ID3D12Resource *r, D3D12_RESOURCE_STATES from, D3D12_RESOURCE_STATES to) {
    D3D12_RESOURCE_BARRIER b = {0};
    b.Type = D3D12_RESOURCE_BARRIER_TYPE_TRANSITION;
    b.Transition.pResource = r;
    b.Transition.Subresource = D3D12_RESOURCE_BARRIER_ALL_SUBRESOURCES;
    b.Transition.StateBefore = from;
    b.Transition.StateAfter = to;
    ID3D12GraphicsCommandList_ResourceBarrier(G.list, 1, &b);
}

static void uav_barrier(void) {
    D3D12_RESOURCE_BARRIER b = {0};
    b.Type = D3D12_RESOURCE_BARRIER_TYPE_UAV;
    ID3D12GraphicsCommandList_ResourceBarrier(G.list, 1, &b);
}

/* ---- an operator: description, cache, initialisation, one execution ------------------------- */
typedef struct {
    UINT present, data_type, flags, dims, sizes[MAX_DIMS], has_strides, strides[MAX_DIMS], align;
    UINT64 total;
} Slot;
typedef struct { UINT op, nslots, param_len; Slot slots[MAX_SLOTS]; BYTE params[32]; } OpSpec;

static int op_inputs(UINT op) {
    switch (op) {
    case OP_DIAGONAL_MATRIX: return 0;
    case OP_ELEMENT_WISE_IDENTITY: case OP_NONZERO_COORDINATES: case OP_DIAGONAL_MATRIX1: return 1;
    case OP_ELEMENT_WISE_BIT_AND: case OP_ELEMENT_WISE_BIT_OR: return 2;
    default: return -1;
    }
}

static int op_slots(UINT op) {
    switch (op) {
    case OP_DIAGONAL_MATRIX: return 1;
    case OP_ELEMENT_WISE_IDENTITY: case OP_DIAGONAL_MATRIX1: return 2;
    case OP_NONZERO_COORDINATES: case OP_ELEMENT_WISE_BIT_AND: case OP_ELEMENT_WISE_BIT_OR: return 3;
    default: return -1;
    }
}

static int param_length(UINT op) {
    return op == OP_DIAGONAL_MATRIX ? 8 : op == OP_DIAGONAL_MATRIX1 ? 20 : 0;
}

/* The DirectML description of `spec`, in storage the caller owns. */
typedef struct {
    DmlBufferTensorDesc buffers[MAX_SLOTS]; DmlTensorDesc tensors[MAX_SLOTS];
    union { DescIdentity identity; DescBinary binary; DescDiagonal diagonal; DescDiagonal1 diagonal1; DescNonZero nonzero; } u;
    DmlOperatorDesc desc;
} BuiltDesc;

static void build_desc(const OpSpec *s, BuiltDesc *b) {
    const DmlTensorDesc *t[MAX_SLOTS] = {0};
    for (UINT i = 0; i < s->nslots; i++) {
        const Slot *slot = &s->slots[i];
        if (!slot->present) continue;
        b->buffers[i] = (DmlBufferTensorDesc){slot->data_type, slot->flags, slot->dims, slot->sizes,
                                              slot->has_strides ? slot->strides : NULL, slot->total, slot->align};
        b->tensors[i] = (DmlTensorDesc){DML_TENSOR_TYPE_BUFFER, &b->buffers[i]};
        t[i] = &b->tensors[i];
    }
    memset(&b->u, 0, sizeof b->u);
    switch (s->op) {
    case OP_ELEMENT_WISE_IDENTITY: b->u.identity = (DescIdentity){t[0], t[1], NULL}; break;
    case OP_ELEMENT_WISE_BIT_AND: case OP_ELEMENT_WISE_BIT_OR: b->u.binary = (DescBinary){t[0], t[1], t[2]}; break;
    case OP_NONZERO_COORDINATES: b->u.nonzero = (DescNonZero){t[0], t[1], t[2]}; break;
    case OP_DIAGONAL_MATRIX:
        b->u.diagonal.Output = t[0];
        memcpy(&b->u.diagonal.Offset, s->params, 4);
        memcpy(&b->u.diagonal.Value, s->params + 4, 4);
        break;
    case OP_DIAGONAL_MATRIX1:
        b->u.diagonal1.Input = t[0];
        b->u.diagonal1.Output = t[1];
        memcpy(&b->u.diagonal1.ValueDataType, s->params, 4);
        memcpy(b->u.diagonal1.Value.Bytes, s->params + 4, 8);
        memcpy(&b->u.diagonal1.FillBegin, s->params + 12, 4);
        memcpy(&b->u.diagonal1.FillEnd, s->params + 16, 4);
        break;
    }
    b->desc = (DmlOperatorDesc){s->op, &b->u};
}

/* Compiled operators cached by their request bytes (type, tensor descriptions, fields). */
#define CACHE_SIZE 512
typedef struct { BYTE *key; size_t key_len; IDmlChild *compiled; ID3D12Resource *persistent;
                 DmlBindingProperties props; } Entry;
static Entry cache[CACHE_SIZE];
static UINT cache_next;

static Status bind_table(IDmlChild *dispatchable, UINT descriptors, IDmlBindingTable **out) {
    if (descriptors > HEAP_DESCRIPTORS) return (Status){E_OUTOFMEMORY, "descriptor heap (operator needs more descriptors)"};
    DmlBindingTableDesc d = {dispatchable, {0}, {0}, descriptors ? descriptors : 1};
    G.heap->lpVtbl->GetCPUDescriptorHandleForHeapStart(G.heap, &d.Cpu);
    G.heap->lpVtbl->GetGPUDescriptorHandleForHeapStart(G.heap, &d.Gpu);
    CHECK(G.dml->v->CreateBindingTable(G.dml, &d, &IID_BindingTable, (void **)out), "CreateBindingTable");
    return OK_STATUS;
}

static Status record(IDmlChild *dispatchable, IDmlBindingTable *table) {
    ID3D12DescriptorHeap *heaps[] = {G.heap};
    ID3D12GraphicsCommandList_SetDescriptorHeaps(G.list, 1, heaps);
    G.recorder->v->RecordDispatch(G.recorder, (ID3D12CommandList *)G.list, dispatchable, table);
    return OK_STATUS;
}

/* Initialise a freshly compiled operator: its persistent resource filled by the initializer. */
static Status initialize(Entry *e) {
    IDmlChild *init = NULL; IDmlBindingTable *table = NULL; ID3D12Resource *temp = NULL;
    Status s = OK_STATUS;
    HRESULT hr = G.dml->v->CreateOperatorInitializer(G.dml, 1, &e->compiled, &IID_Initializer, (void **)&init);
    if (FAILED(hr)) return (Status){hr, "CreateOperatorInitializer"};
    DmlBindingProperties ip; init->v->GetBindingProperties(init, &ip);
    if (e->props.PersistentResourceSize) s = make_buffer(e->props.PersistentResourceSize, D3D12_HEAP_TYPE_DEFAULT, &e->persistent);
    if (s.hr == S_OK && ip.TemporaryResourceSize) s = make_buffer(ip.TemporaryResourceSize, D3D12_HEAP_TYPE_DEFAULT, &temp);
    if (s.hr == S_OK) s = bind_table(init, ip.RequiredDescriptorCount, &table);
    if (s.hr == S_OK) {
        DmlBufferBinding pb = {e->persistent, 0, e->props.PersistentResourceSize};
        DmlBindingDesc out = {e->persistent ? DML_BINDING_TYPE_BUFFER : DML_BINDING_TYPE_NONE, e->persistent ? &pb : NULL};
        table->v->BindOutputs(table, 1, &out);
        DmlBufferBinding tb = {temp, 0, ip.TemporaryResourceSize};
        DmlBindingDesc td = {DML_BINDING_TYPE_BUFFER, &tb};
        if (temp) table->v->BindTemporaryResource(table, &td);
        record(init, table);
        s = submit();
        if (s.hr != S_OK && !s.stage) s.stage = "initialize";
    }
    if (table) table->v->Release(table);
    if (temp) ID3D12Resource_Release(temp);
    init->v->Release(init);
    return s;
}

static Status compiled_for(const OpSpec *spec, const BYTE *key, size_t key_len, Entry **out, int *hit) {
    for (UINT i = 0; i < CACHE_SIZE; i++)
        if (cache[i].key && cache[i].key_len == key_len && !memcmp(cache[i].key, key, key_len)) {
            *out = &cache[i]; *hit = 1; return OK_STATUS;
        }
    *hit = 0;
    BuiltDesc b; build_desc(spec, &b);
    IDmlChild *op = NULL, *compiled = NULL;
    CHECK(G.dml->v->CreateOperator(G.dml, &b.desc, &IID_Operator, (void **)&op), "CreateOperator");
    HRESULT hr = G.dml->v->CompileOperator(G.dml, op, 0, &IID_Compiled, (void **)&compiled);
    op->v->Release(op);
    if (FAILED(hr)) return (Status){hr, "CompileOperator"};
    Entry *e = &cache[cache_next++ % CACHE_SIZE];
    if (e->key) {                                            /* the oldest goes */
        free(e->key); e->compiled->v->Release(e->compiled);
        if (e->persistent) ID3D12Resource_Release(e->persistent);
    }
    memset(e, 0, sizeof *e);
    e->compiled = compiled;
    compiled->v->GetBindingProperties(compiled, &e->props);
    Status s = initialize(e);
    if (s.hr != S_OK) {
        compiled->v->Release(compiled);
        if (e->persistent) ID3D12Resource_Release(e->persistent);
        memset(e, 0, sizeof *e);
        return s;
    }
    e->key = malloc(key_len); memcpy(e->key, key, key_len); e->key_len = key_len;
    *out = e;
    return OK_STATUS;
}

/* The resources of one execution: a default-heap buffer per tensor, the upload and readback
   buffers, the temporary resource; `back` is each output's offset in the readback buffer. */
typedef struct { ID3D12Resource *buffers[MAX_SLOTS], *upload, *readback, *temp; UINT64 back[MAX_SLOTS]; } Staged;

static void release_staged(Staged *st) {
    for (UINT i = 0; i < MAX_SLOTS; i++) if (st->buffers[i]) ID3D12Resource_Release(st->buffers[i]);
    if (st->upload) ID3D12Resource_Release(st->upload);
    if (st->readback) ID3D12Resource_Release(st->readback);
    if (st->temp) ID3D12Resource_Release(st->temp);
}

/* Create the resources, copy every slot's bytes up, and record the copies into the tensors. */
static Status stage(const OpSpec *spec, const Entry *e, BYTE **data, Staged *st) {
    UINT64 offsets[MAX_SLOTS] = {0}, total = 0, back_total = 0;
    int inputs = op_inputs(spec->op);
    Status s = OK_STATUS;
    for (UINT i = 0; i < spec->nslots && s.hr == S_OK; i++) {
        if (!spec->slots[i].present) continue;
        UINT64 padded = (spec->slots[i].total + 255) & ~(UINT64)255;
        offsets[i] = total; total += padded;
        if ((int)i >= inputs) { st->back[i] = back_total; back_total += padded; }
        s = make_buffer(spec->slots[i].total, D3D12_HEAP_TYPE_DEFAULT, &st->buffers[i]);
    }
    if (s.hr == S_OK) s = make_buffer(total, D3D12_HEAP_TYPE_UPLOAD, &st->upload);
    if (s.hr == S_OK) s = make_buffer(back_total, D3D12_HEAP_TYPE_READBACK, &st->readback);
    if (s.hr == S_OK && e->props.TemporaryResourceSize) s = make_buffer(e->props.TemporaryResourceSize, D3D12_HEAP_TYPE_DEFAULT, &st->temp);
    if (s.hr != S_OK) return s;
    BYTE *mapped = NULL;
    CHECK(ID3D12Resource_Map(st->upload, 0, NULL, (void **)&mapped), "Map upload");
    for (UINT i = 0; i < spec->nslots; i++)
        if (spec->slots[i].present) memcpy(mapped + offsets[i], data[i], spec->slots[i].total);
    ID3D12Resource_Unmap(st->upload, 0, NULL);
    for (UINT i = 0; i < spec->nslots; i++) {
        if (!spec->slots[i].present) continue;
        ID3D12GraphicsCommandList_CopyBufferRegion(G.list, st->buffers[i], 0, st->upload, offsets[i], spec->slots[i].total);
        transition(st->buffers[i], D3D12_RESOURCE_STATE_COPY_DEST, D3D12_RESOURCE_STATE_UNORDERED_ACCESS);
    }
    return OK_STATUS;
}

/* Bind the staged tensors, record the dispatch and the copies back. */
static void record_execution(const OpSpec *spec, const Entry *e, const Staged *st, IDmlBindingTable *table) {
    int inputs = op_inputs(spec->op);
    DmlBufferBinding bb[MAX_SLOTS]; DmlBindingDesc bd[MAX_SLOTS];
    for (UINT i = 0; i < spec->nslots; i++) {
        bb[i] = (DmlBufferBinding){st->buffers[i], 0, spec->slots[i].total};
        bd[i] = (DmlBindingDesc){st->buffers[i] ? DML_BINDING_TYPE_BUFFER : DML_BINDING_TYPE_NONE, st->buffers[i] ? &bb[i] : NULL};
    }
    table->v->BindInputs(table, inputs, inputs ? bd : NULL);
    table->v->BindOutputs(table, spec->nslots - inputs, bd + inputs);
    DmlBufferBinding pb = {e->persistent, 0, e->props.PersistentResourceSize}, tb = {st->temp, 0, e->props.TemporaryResourceSize};
    DmlBindingDesc pd = {DML_BINDING_TYPE_BUFFER, &pb}, td = {DML_BINDING_TYPE_BUFFER, &tb};
    if (e->persistent) table->v->BindPersistentResource(table, &pd);
    if (st->temp) table->v->BindTemporaryResource(table, &td);
    record(e->compiled, table);
    uav_barrier();
    for (UINT i = inputs; i < spec->nslots; i++) {
        transition(st->buffers[i], D3D12_RESOURCE_STATE_UNORDERED_ACCESS, D3D12_RESOURCE_STATE_COPY_SOURCE);
        ID3D12GraphicsCommandList_CopyBufferRegion(G.list, st->readback, st->back[i], st->buffers[i], 0, spec->slots[i].total);
    }
}

/* Execute: upload every slot's bytes, dispatch, read every output slot back into its bytes. */
static Status execute(const OpSpec *spec, Entry *e, BYTE **data) {
    Staged st = {0};
    IDmlBindingTable *table = NULL;
    Status s = stage(spec, e, data, &st);
    if (s.hr == S_OK) s = bind_table(e->compiled, e->props.RequiredDescriptorCount, &table);
    if (s.hr == S_OK) {
        record_execution(spec, e, &st, table);
        s = submit();
        if (s.hr != S_OK && !s.stage) s.stage = "execute";
    }
    BYTE *mapped = NULL;
    if (s.hr == S_OK) {
        HRESULT hr = ID3D12Resource_Map(st.readback, 0, NULL, (void **)&mapped);
        if (FAILED(hr)) s = (Status){hr, "Map readback"};
        else {
            for (UINT i = op_inputs(spec->op); i < spec->nslots; i++) memcpy(data[i], mapped + st.back[i], spec->slots[i].total);
            ID3D12Resource_Unmap(st.readback, 0, NULL);
        }
    }
    if (s.hr != S_OK) {       /* a command list left open by a failure is reset for the next request */
        ID3D12GraphicsCommandList_Close(G.list);
        ID3D12CommandAllocator_Reset(G.allocator);
        ID3D12GraphicsCommandList_Reset(G.list, G.allocator, NULL);
    }
    if (table) table->v->Release(table);
    release_staged(&st);
    return s;
}

static Status run_op(const OpSpec *spec, const BYTE *key, size_t key_len, BYTE **data, int *hit) {
    Entry *e = NULL;
    Status s = compiled_for(spec, key, key_len, &e, hit);
    return s.hr == S_OK ? execute(spec, e, data) : s;
}

/* ---- the pipe ------------------------------------------------------------------------------ */
static HANDLE in_handle, out_handle;

static int read_all(void *buffer, size_t size) {
    BYTE *p = buffer;
    while (size) {
        DWORD got = 0, want = size > (1u << 30) ? (1u << 30) : (DWORD)size;
        if (!ReadFile(in_handle, p, want, &got, NULL) || got == 0) return 0;
        p += got; size -= got;
    }
    return 1;
}

static int write_all(const void *buffer, size_t size) {
    const BYTE *p = buffer;
    while (size) {
        DWORD put = 0, want = size > (1u << 30) ? (1u << 30) : (DWORD)size;
        if (!WriteFile(out_handle, p, want, &put, NULL) || put == 0) return 0;
        p += put; size -= put;
    }
    return 1;
}

/* A growable answer buffer, sent as one frame. */
typedef struct { BYTE *data; size_t len, cap; } Out;
static void put(Out *o, const void *p, size_t n) {
    if (o->len + n > o->cap) {
        o->cap = (o->len + n) * 2 + 64;
        o->data = realloc(o->data, o->cap);
        if (!o->data) { fprintf(stderr, "dml_host: out of memory for a %zu-byte answer\n", o->cap); exit(3); }
    }
    memcpy(o->data + o->len, p, n); o->len += n;
}
static void put_u32(Out *o, UINT v) { put(o, &v, 4); }
static int send_frame(Out *o) {
    UINT32 n = (UINT32)o->len;
    int ok = write_all(&n, 4) && write_all(o->data, o->len);
    o->len = 0;
    return ok;
}

/* ---- request parsing ------------------------------------------------------------------------ */
typedef struct { const BYTE *p, *end; } Reader;
static int get(Reader *r, void *out, size_t n) {
    if ((size_t)(r->end - r->p) < n) return 0;
    memcpy(out, r->p, n); r->p += n; return 1;
}

static const char *parse_spec(Reader *r, OpSpec *s) {
    memset(s, 0, sizeof *s);
    if (!get(r, &s->op, 4) || !get(r, &s->nslots, 4)) return "truncated operator header";
    if (op_slots(s->op) < 0) return "operator type not handled by this host";
    if ((int)s->nslots != op_slots(s->op)) return "wrong tensor slot count for the operator";
    for (UINT i = 0; i < s->nslots; i++) {
        Slot *t = &s->slots[i];
        if (!get(r, &t->present, 4)) return "truncated tensor slot";
        if (!t->present) continue;
        if (!get(r, &t->data_type, 4) || !get(r, &t->flags, 4) || !get(r, &t->dims, 4)) return "truncated tensor description";
        if (t->dims < 1 || t->dims > MAX_DIMS) return "dimension count outside 1..8";
        if (!get(r, t->sizes, 4 * t->dims) || !get(r, &t->has_strides, 4)) return "truncated sizes";
        if (t->has_strides && !get(r, t->strides, 4 * t->dims)) return "truncated strides";
        if (!get(r, &t->total, 8) || !get(r, &t->align, 4)) return "truncated tensor size";
        if (t->total == 0 || t->total > ((UINT64)1 << 34)) return "TotalTensorSizeInBytes out of range";
    }
    if (!get(r, &s->param_len, 4) || (int)s->param_len != param_length(s->op) || !get(r, s->params, s->param_len))
        return "wrong operator field bytes";
    return NULL;
}

static void handle_execute(Reader *r, Out *o) {
    OpSpec spec;
    const BYTE *key = r->p;
    const char *bad = parse_spec(r, &spec);
    if (bad) { put_u32(o, 2); put(o, bad, strlen(bad)); return; }
    size_t key_len = (size_t)(r->p - key);
    BYTE *data[MAX_SLOTS] = {0};
    for (UINT i = 0; i < spec.nslots; i++) {
        if (!spec.slots[i].present) continue;
        if ((UINT64)(r->end - r->p) < spec.slots[i].total) { put_u32(o, 2); put(o, "truncated buffer", 16); return; }
        data[i] = (BYTE *)r->p; r->p += spec.slots[i].total;   /* outputs are overwritten in the request buffer */
    }
    int hit = 0;
    Status s = run_op(&spec, key, key_len, data, &hit);
    if (s.hr != S_OK) {
        put_u32(o, 1); put_u32(o, (UINT)s.hr); put_u32(o, (UINT)strlen(s.stage)); put(o, s.stage, strlen(s.stage));
        return;
    }
    put_u32(o, 0); put_u32(o, hit);
    for (UINT i = op_inputs(spec.op); i < spec.nslots; i++) put(o, data[i], spec.slots[i].total);
}

/* ---- device facts -------------------------------------------------------------------------- */
static void json_string(Out *o, const char *s) {
    put(o, "\"", 1);
    for (; *s; s++) {
        char esc[8];
        if (*s == '"' || *s == '\\') { esc[0] = '\\'; esc[1] = *s; put(o, esc, 2); }
        else if ((unsigned char)*s < 0x20) { snprintf(esc, sizeof esc, "\\u%04x", *s); put(o, esc, 6); }
        else put(o, s, 1);
    }
    put(o, "\"", 1);
}

static void read_adapter(void);

static void handle_caps(Out *o) {
    char level[16], text[64];
    if (!G.adapter[0]) read_adapter();
    snprintf(level, sizeof level, "%u_%u", G.feature_level >> 12, (G.feature_level >> 8) & 15);
    put_u32(o, 0);
    put(o, "{\"directml_version\": ", 21); json_string(o, G.version);
    put(o, ", \"feature_level\": ", 19); json_string(o, level);
    put(o, ", \"d3d12\": ", 11); json_string(o, G.adapter);
    put(o, ", \"self_test\": ", 15); json_string(o, G.self_test);
    put(o, ", \"data_types\": {", 17);
    for (UINT t = 1; t <= DT_LAST; t++) {
        UINT query = t; BOOL supported = FALSE;
        HRESULT hr = G.dml ? G.dml->v->CheckFeatureSupport(G.dml, DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT, 4, &query, 4, &supported)
                           : E_FAIL;
        snprintf(text, sizeof text, "%s\"%s\": %s", t > 1 ? ", " : "", TYPE_NAMES[t], SUCCEEDED(hr) && supported ? "true" : "false");
        put(o, text, strlen(text));
    }
    put(o, "}}", 2);
}

static void read_version(HMODULE dll) {
    WCHAR path[MAX_PATH]; DWORD ignored = 0;
    strcpy(G.version, "unknown");
    if (!GetModuleFileNameW(dll, path, MAX_PATH)) return;
    DWORD size = GetFileVersionInfoSizeW(path, &ignored);
    void *info = size ? malloc(size) : NULL;
    VS_FIXEDFILEINFO *fixed = NULL; UINT len = 0;
    if (info && GetFileVersionInfoW(path, 0, size, info) && VerQueryValueW(info, L"\\", (void **)&fixed, &len) && fixed)
        snprintf(G.version, sizeof G.version, "%lu.%lu.%lu.%lu", (unsigned long)HIWORD(fixed->dwFileVersionMS),
                 (unsigned long)LOWORD(fixed->dwFileVersionMS), (unsigned long)HIWORD(fixed->dwFileVersionLS),
                 (unsigned long)LOWORD(fixed->dwFileVersionLS));
    free(info);
}

static void read_adapter(void) {
    IDXGIFactory1 *factory = NULL; IDXGIAdapter1 *adapter = NULL; DXGI_ADAPTER_DESC1 d;
    strcpy(G.adapter, "unknown");
    if (FAILED(CreateDXGIFactory1(&IID_IDXGIFactory1, (void **)&factory))) return;
    if (SUCCEEDED(IDXGIFactory1_EnumAdapters1(factory, 0, &adapter)) && SUCCEEDED(IDXGIAdapter1_GetDesc1(adapter, &d)))
        WideCharToMultiByte(CP_UTF8, 0, d.Description, -1, G.adapter, sizeof G.adapter, NULL, NULL);
    if (adapter) IDXGIAdapter1_Release(adapter);
    IDXGIFactory1_Release(factory);
}

/* ---- start-up: device, queue, heap, DirectML at its highest level ---------------------------- */
static double seconds_now(void) {
    LARGE_INTEGER now, rate;
    QueryPerformanceCounter(&now); QueryPerformanceFrequency(&rate);
    return (double)now.QuadPart / (double)rate.QuadPart;
}
static double d3d12_seconds, heap_seconds, dml_load_seconds, dml_device_seconds;  /* start-up timing (DML_LOWER_HOST_TIMING) */

static const char *start_device(char *why, size_t n) {
    double began = seconds_now();
    HRESULT hr = D3D12CreateDevice(NULL, D3D_FEATURE_LEVEL_11_0, &IID_ID3D12Device, (void **)&G.d3d);
    d3d12_seconds = seconds_now() - began;
    if (FAILED(hr)) { snprintf(why, n, "D3D12CreateDevice failed (HRESULT 0x%08lx)", (unsigned long)hr); return why; }
    D3D12_COMMAND_QUEUE_DESC qd = {D3D12_COMMAND_LIST_TYPE_DIRECT, 0, D3D12_COMMAND_QUEUE_FLAG_NONE, 0};
    D3D12_DESCRIPTOR_HEAP_DESC hd = {D3D12_DESCRIPTOR_HEAP_TYPE_CBV_SRV_UAV, HEAP_DESCRIPTORS, D3D12_DESCRIPTOR_HEAP_FLAG_SHADER_VISIBLE, 0};
    if (FAILED(hr = ID3D12Device_CreateCommandQueue(G.d3d, &qd, &IID_ID3D12CommandQueue, (void **)&G.queue))
        || FAILED(hr = ID3D12Device_CreateCommandAllocator(G.d3d, D3D12_COMMAND_LIST_TYPE_DIRECT, &IID_ID3D12CommandAllocator, (void **)&G.allocator))
        || FAILED(hr = ID3D12Device_CreateCommandList(G.d3d, 0, D3D12_COMMAND_LIST_TYPE_DIRECT, G.allocator, NULL,
                                                      &IID_ID3D12GraphicsCommandList, (void **)&G.list))
        || FAILED(hr = ID3D12Device_CreateFence(G.d3d, 0, D3D12_FENCE_FLAG_NONE, &IID_ID3D12Fence, (void **)&G.fence))
        || (began = seconds_now(), FAILED(hr = ID3D12Device_CreateDescriptorHeap(G.d3d, &hd, &IID_ID3D12DescriptorHeap, (void **)&G.heap)))) {
        snprintf(why, n, "creating the D3D12 queue, list, fence or descriptor heap failed (HRESULT 0x%08lx)", (unsigned long)hr);
        return why;
    }
    heap_seconds = seconds_now() - began;
    G.event = CreateEventW(NULL, FALSE, FALSE, NULL);
    /* the adapter's name (DXGI: 0.1-0.4 s on Wine) is read when CAPS asks for it, not here */
    began = seconds_now();
    HMODULE dll = LoadLibraryW(L"DirectML.dll");
    dml_load_seconds = seconds_now() - began;
    if (!dll) { snprintf(why, n, "cannot load DirectML.dll (error %lu)", (unsigned long)GetLastError()); return why; }
    read_version(dll);
    CreateDevice1Fn create = (CreateDevice1Fn)(void *)GetProcAddress(dll, "DMLCreateDevice1");
    if (!create) { snprintf(why, n, "DirectML.dll %s has no DMLCreateDevice1", G.version); return why; }
    hr = E_FAIL;
    began = seconds_now();
    for (size_t i = 0; i < sizeof LEVELS / sizeof *LEVELS && FAILED(hr); i++) {
        hr = create(G.d3d, 0, LEVELS[i], &IID_Device, (void **)&G.dml);
        G.feature_level = LEVELS[i];
    }
    dml_device_seconds = seconds_now() - began;
    if (FAILED(hr)) { snprintf(why, n, "DMLCreateDevice1 failed at every feature level (HRESULT 0x%08lx)", (unsigned long)hr); return why; }
    DmlQueryFeatureLevels q = {sizeof LEVELS / sizeof *LEVELS, LEVELS};
    UINT highest = 0;
    if (SUCCEEDED(G.dml->v->CheckFeatureSupport(G.dml, DML_FEATURE_FEATURE_LEVELS, sizeof q, &q, 4, &highest)) && highest)
        G.feature_level = highest;
    if (FAILED(hr = G.dml->v->CreateCommandRecorder(G.dml, &IID_Recorder, (void **)&G.recorder))) {
        snprintf(why, n, "CreateCommandRecorder failed (HRESULT 0x%08lx)", (unsigned long)hr); return why;
    }
    return NULL;
}

/* ---- the canary: answers known by heart, or nothing runs -------------------------------------- */
static void packed_slot(Slot *s, UINT type, UINT dims, const UINT *sizes, UINT64 total) {
    memset(s, 0, sizeof *s);
    s->present = 1; s->data_type = type; s->dims = dims; s->total = total;
    memcpy(s->sizes, sizes, 4 * dims);
}

/* Test hook (tests/runtime/directml/test_dml_host_guards.py): DML_LOWER_TEST_CANARY_VALUE=v makes the
   canary expect v on the diagonal instead of the 2.5 it asks for, as a device giving wrong answers
   would look, so the refusal below is exercised on a correct device. Never set it otherwise. */
static float canary_expected(void) {
    char text[64];
    DWORD n = GetEnvironmentVariableA("DML_LOWER_TEST_CANARY_VALUE", text, sizeof text);
    return n > 0 && n < sizeof text ? strtof(text, NULL) : 2.5f;
}

static const char *canary(char *why, size_t n) {
    /* DIAGONAL_MATRIX FLOAT32 {3,4}, Offset 1, Value 2.5: 2.5 where x == y + 1 */
    OpSpec d = {OP_DIAGONAL_MATRIX, 1, 8};
    const UINT dsizes[] = {3, 4}; INT offset = 1; FLOAT value = 2.5f, expected = canary_expected();
    packed_slot(&d.slots[0], DT_FLOAT32, 2, dsizes, 48);
    memcpy(d.params, &offset, 4); memcpy(d.params + 4, &value, 4);
    float eye[12]; memset(eye, 0xff, sizeof eye);
    BYTE *dd[MAX_SLOTS] = {(BYTE *)eye};
    int hit;
    Status s = run_op(&d, (const BYTE *)"canary-diagonal", 15, dd, &hit);
    if (s.hr != S_OK) { snprintf(why, n, "failed: DIAGONAL_MATRIX canary: %s HRESULT 0x%08lx", s.stage, (unsigned long)s.hr); return why; }
    for (int i = 0; i < 12; i++)
        if (eye[i] != ((i % 4) == (i / 4) + 1 ? expected : 0.0f)) {
            snprintf(why, n, "failed: DIAGONAL_MATRIX canary gave %g at element %d, not %g (a Vulkan driver without "
                     "descriptor indexing, e.g. Mesa < 25, gives zeros)", eye[i], i,
                     (i % 4) == (i / 4) + 1 ? expected : 0.0f);
            return why;
        }
    /* NONZERO_COORDINATES FLOAT32 {2,3} {0,1.5,0,-2,0,3}: count 3, coordinates (0,1) (1,0) (1,2) */
    OpSpec z = {OP_NONZERO_COORDINATES, 3, 0};
    const UINT xs[] = {2, 3}, cs[] = {1}, ks[] = {6, 2};
    packed_slot(&z.slots[0], DT_FLOAT32, 2, xs, 24);
    packed_slot(&z.slots[1], DT_UINT32, 1, cs, 4);
    packed_slot(&z.slots[2], DT_UINT32, 2, ks, 48);
    float x[6] = {0, 1.5f, 0, -2, 0, 3}; UINT count = 0xffffffffu, coords[12];
    memset(coords, 0xff, sizeof coords);
    BYTE *zd[MAX_SLOTS] = {(BYTE *)x, (BYTE *)&count, (BYTE *)coords};
    s = run_op(&z, (const BYTE *)"canary-nonzero", 14, zd, &hit);
    if (s.hr != S_OK) { snprintf(why, n, "failed: NONZERO_COORDINATES canary: %s HRESULT 0x%08lx", s.stage, (unsigned long)s.hr); return why; }
    const UINT want[6] = {0, 1, 1, 0, 1, 2};
    if (count != 3 || memcmp(coords, want, sizeof want)) {
        snprintf(why, n, "failed: NONZERO_COORDINATES canary gave count %u, first row (%u,%u) instead of 3, (0,1) "
                 "(a Vulkan driver without descriptor indexing, e.g. Mesa < 25, gives 0)", count, coords[0], coords[1]);
        return why;
    }
    return NULL;
}

int main(void) {
    in_handle = GetStdHandle(STD_INPUT_HANDLE);
    out_handle = GetStdHandle(STD_OUTPUT_HANDLE);
    char why[400], hello[600];
    double began = seconds_now();
    const char *failed = start_device(why, sizeof why);
    double device_up = seconds_now();
    int ready = 0;
    if (failed) {
        snprintf(G.self_test, sizeof G.self_test, "failed: %s", failed);
    } else if ((failed = canary(why, sizeof why))) {
        snprintf(G.self_test, sizeof G.self_test, "%s", failed);
    } else {
        strcpy(G.self_test, "passed");
        ready = 1;
    }
    if (ready)
        snprintf(hello, sizeof hello, "ok DirectML %s, feature level %u_%u", G.version, G.feature_level >> 12,
                 (G.feature_level >> 8) & 15);
    else
        snprintf(hello, sizeof hello, "%s", G.self_test);
    /* benchmarks/directml_bench.py: where the start-up goes, once the process runs (Wine's own start before it) */
    if (GetEnvironmentVariableA("DML_LOWER_HOST_TIMING", NULL, 0))
        fprintf(stderr, "dml_host start-up: device %.0f ms (D3D12 device %.0f ms, descriptor heap %.0f ms, loading "
                "DirectML.dll %.0f ms, DMLCreateDevice1 %.0f ms), self-test %.0f ms\n", (device_up - began) * 1e3,
                d3d12_seconds * 1e3, heap_seconds * 1e3, dml_load_seconds * 1e3, dml_device_seconds * 1e3,
                (seconds_now() - device_up) * 1e3);
    Out o = {0};
    put(&o, hello, strlen(hello));
    if (!send_frame(&o)) return 1;
    for (;;) {
        UINT32 size;
        if (!read_all(&size, 4)) break;                    /* stdin closed: the parent is gone or done */
        BYTE *request = malloc(size ? size : 1);
        if (!request || !read_all(request, size)) { fprintf(stderr, "dml_host: truncated request\n"); return 1; }
        Reader r = {request, request + size};
        UINT command = 0;
        get(&r, &command, 4);
        if (command == 2) handle_caps(&o);
        else if (command == 1 && ready) handle_execute(&r, &o);
        else if (command == 1) { put_u32(&o, 2); put(&o, G.self_test, strlen(G.self_test)); }
        else { put_u32(&o, 2); put(&o, "unknown request", 15); }
        free(request);
        if (!send_frame(&o)) break;
    }
    return 0;
}
