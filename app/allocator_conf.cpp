// jemalloc's settings for the tokentap binary, read when the allocator starts, before main.
// Compiled in only when the binary links jemalloc (CMakeLists.txt); MALLOC_CONF in the
// environment overrides them, one by one.
//
// - background_thread:true — jemalloc gives freed pages back to the system from a thread of its
//   own.  Without it, it does so only inside allocation calls: a proxy whose streams sit idle
//   makes none, and keeps the pages a burst freed (a thousand streams starting together free
//   their transient buffers and frames) for as long as the streams stay quiet.  jemalloc's
//   TUNING.md suggests it wherever its threads are allowed.
// - dirty_decay_ms:1000 — pages unused for a second go back (jemalloc's default: 10 s).  A
//   proxy under steady load reuses what it freed within milliseconds; what a spike left behind
//   goes back soon after.
extern "C" {
extern const char* malloc_conf;
const char* malloc_conf = "background_thread:true,dirty_decay_ms:1000";
}
