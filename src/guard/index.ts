// The `cacheward/guard` entry point. It exports nothing yet: its capability is an open issue, and an
// export must never pretend to work before it does.

export {};
