/**
 * The unit specs' test kit, one copy of each: in-memory fakes of the ports (stores, the stats
 * snapshot, the regressions view, the routing clock), a logger that keeps its lines, a hand-moved
 * clock, factories with overrides, the error a call throws, and dead or silent ports. Fakes
 * implement the port they stand in for (or extend the real in-process adapter), so nothing is cast
 * into place. Test-only: nothing under src/ outside its specs imports it.
 */
export * from './clock';
export * from './config';
export * from './errors';
export * from './experiments';
export * from './logger';
export * from './net';
export * from './providers';
export * from './routing';
export * from './stats';
export * from './stores';
