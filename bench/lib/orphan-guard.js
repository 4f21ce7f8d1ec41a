'use strict';
/**
 * Preloaded (`node -r`) into the processes the bench starts: if the harness dies without stopping
 * them (SIGKILL, a crashed test runner), the child notices that its parent changed and stops itself
 * with SIGTERM (the gateway's own graceful shutdown), so no server outlives the bench. One unref'd
 * check per second; nothing else.
 */
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) process.kill(process.pid, 'SIGTERM');
}, 1000).unref();
