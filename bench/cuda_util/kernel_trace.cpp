// libkernel_trace.so: a timeline of every kernel a process runs, kernels inside CUDA graphs
// included, for the lent GPU machine (which has Nsight Compute but no Nsight Systems: ncu times
// each kernel alone, serialised, so it cannot say which of a decode graph's lanes sets the step's
// critical path). Preload it:
//   KERNEL_TRACE_OUT=trace.csv LD_PRELOAD=libkernel_trace.so deepinfer bench --device cuda ...
// On load it enables CUPTI's concurrent-kernel activity records (which do not serialise kernels);
// at exit (before the CUDA runtime's own exit handler) it writes one CSV row per kernel: start_ns,end_ns,stream,channel,graph,name (demangled,
// commas replaced). tools/device/kernel_timeline.py reads it (one decode step's lanes).
#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

constexpr size_t kBufferBytes = 8u << 20;

struct Row {
  uint64_t start, end;
  uint32_t stream, channel, graph;
  std::string name;
};

// The records gathered so far (CUPTI hands completed buffers back on its own thread).
struct Trace {
  std::mutex mu;
  std::vector<Row> rows;
  bool ok = false;
};

Trace& trace() {
  static Trace t;  // one per process: CUPTI's callbacks take no user pointer
  return t;
}

std::string demangle(const char* mangled) {
  if (!mangled) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : mangled;
  std::free(d);
  for (char& c : s)
    if (c == ',' || c == '\n') c = ';';
  return s;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::vector<Row> got;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
    got.push_back({k->start, k->end, k->streamId, k->channelID, k->graphId, demangle(k->name)});
  }
  std::free(buffer);
  Trace& t = trace();
  std::lock_guard<std::mutex> lock(t.mu);
  t.rows.insert(t.rows.end(), std::make_move_iterator(got.begin()), std::make_move_iterator(got.end()));
}

// Writes the rows gathered so far (once).
void trace_write() {
  Trace& t = trace();
  if (!t.ok) return;
  t.ok = false;
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  const char* path = std::getenv("KERNEL_TRACE_OUT");
  FILE* f = std::fopen(path && *path ? path : "kernel_trace.csv", "w");
  if (!f) {
    std::fprintf(stderr, "kernel_trace: cannot write %s\n", path ? path : "kernel_trace.csv");
    return;
  }
  std::lock_guard<std::mutex> lock(t.mu);
  std::fprintf(f, "start_ns,end_ns,stream,channel,graph,name\n");
  for (const Row& r : t.rows)
    std::fprintf(f, "%llu,%llu,%u,%u,%u,%s\n", static_cast<unsigned long long>(r.start),
                 static_cast<unsigned long long>(r.end), r.stream, r.channel, r.graph, r.name.c_str());
  std::fclose(f);
  std::fprintf(stderr, "kernel_trace: %zu kernels\n", t.rows.size());
}

// The first context's creation: the CUDA runtime has registered its own exit handler by then, so
// ours, registered now, runs before it (exit handlers run in reverse order) while CUPTI can still
// flush.
void CUPTIAPI on_resource(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void*) {
  static std::once_flag once;
  if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED)
    std::call_once(once, [] { std::atexit(trace_write); });
}

__attribute__((constructor)) void trace_start() {
  Trace& t = trace();
  CUpti_SubscriberHandle sub = nullptr;
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
      cuptiSubscribe(&sub, on_resource, nullptr) != CUPTI_SUCCESS ||
      cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "kernel_trace: CUPTI activity tracing could not be enabled\n");
    return;
  }
  t.ok = true;
}

}  // namespace
