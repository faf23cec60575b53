// jemalloc's options for tessera-full, read by jemalloc at its first allocation (the `malloc_conf`
// symbol; MALLOC_CONF in the environment still overrides it). Compiled in only when tessera-full
// links jemalloc (src/cli/CMakeLists.txt).
//
// dirty_decay_ms:-1 keeps freed pages for reuse instead of handing them back to the kernel over the
// next 10 s. A scheduling cycle builds and frees tens of megabytes of per-job state (100,000 pending
// jobs), several times a second in a storm; with the default decay the pages went back between cycles
// and every cycle faulted them in again (11% of a cycle's samples were page faults, docs/performance.md).
// The process's resident size then stays at its peak, which is what the memory goals bound anyway.
//
// lg_extent_max_active_fit:20 lets a request be served from a kept extent up to 2^20 times its size
// (default 2^6). With the default, jemalloc mapped fresh pages for each cycle's 83,000 reasons and
// pending list rather than cut them from the larger extents the last cycle freed: `bench cycle`
// (10,000 nodes, 100,000 pending) took 9,000 page faults over five cycles after a small change, and
// takes about 500 with it; its peak resident size fell from 328 MB to 255 MB.
#ifdef TESSERA_JEMALLOC_CONF
extern "C" {
__attribute__((used)) const char* malloc_conf = "dirty_decay_ms:-1,muzzy_decay_ms:-1,lg_extent_max_active_fit:20";
}
#endif
