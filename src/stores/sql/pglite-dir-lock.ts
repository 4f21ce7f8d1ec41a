import { randomUUID } from 'node:crypto';
import { closeSync, fsyncSync, futimesSync, linkSync, mkdirSync, openSync, readFileSync, readlinkSync, realpathSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';

/*
 * PGlite is Postgres in single-user mode: it has no postmaster.pid interlock, and two processes that
 * open one data directory corrupt it. Every process that opens a file-backed PGlite holds this lock on
 * the directory until it closes the store.
 *
 * Why not a library: flock/fcntl (released by the kernel when the holder dies) need a native addon
 * (fs-ext, os-lock), which the slim Docker image cannot build; proper-lockfile records no pid and
 * judges staleness by an mtime that the holder must refresh in time, so a long stall of the holder
 * hands a live lock to another process.
 *
 * What is used instead, as Postgres's postmaster.pid: a lock file created atomically (written whole to
 * a temporary file, then hard-linked into place, which fails if it exists) holding the holder's pid,
 * host name and start identity. A lock whose holder is provably gone is taken over:
 *  - same host, same boot, same pid namespace: gone when the pid does not exist, or when it exists but
 *    its start time (/proc/<pid>/stat) differs from the recorded one (the pid was reused);
 *  - recorded under another boot of this host (Linux boot_id): gone;
 *  - where the holder cannot be checked (another host, another pid namespace such as an earlier run of
 *    this container, no /proc): gone once the holder has not refreshed the file's mtime (every 10 s)
 *    for 30 s.
 * Removing a stale lock happens under a second lock file (`.takeover`), so two processes that both
 * find it stale cannot remove each other's fresh lock. That guard lives for microseconds; one left by a
 * process killed inside that window is removed the way Postgres removes a stale postmaster.pid (judged,
 * then unlinked, unguarded): the one race left, and it needs that kill and two racing openers after it.
 */

const LOCK_FILE = 'gateway.lock';
const REFRESH_MS = 10_000;
/** A lock whose holder cannot be checked counts as abandoned after this long without a refresh. */
const ABANDONED_AFTER_MS = 30_000;
const TAKEOVER_WAIT_MS = 25;
const TAKEOVER_ATTEMPTS = 80;
/** link(2) refused by the file system (FAT, some network mounts): create the file with O_EXCL instead. */
const NO_HARD_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS', 'EXDEV']);

interface LockRecord {
  pid: number;
  hostname: string;
  /** For people reading the error or the file. */
  startedAt: string;
  /** Linux: /proc/sys/kernel/random/boot_id. */
  bootId?: string;
  /** Linux: the pid namespace (`pid:[inode]`) in which `pid` means this process. */
  pidNamespace?: string;
  /** Linux: field 22 of /proc/<pid>/stat, the process's start time since boot in clock ticks. */
  startTicks?: string;
  /** Tells this holder's file from a later one at the same path. */
  token: string;
}

/**
 * What the locked directory holds, for the messages: the embedded database by default; the trace
 * spool (src/traces/spool) takes the same lock on its own folder, since two processes appending to
 * one journal would interleave and replay each other's records.
 */
export interface LockSubject {
  /** e.g. "the embedded database": followed by " in <dir>". */
  what: string;
  /** Why two processes must not share it, said after "stop it first: ". */
  rule: string;
}

const PGLITE: LockSubject = { what: 'the embedded database', rule: 'two processes must never open one PGlite data directory' };

/** The directory is locked by another process (or already open in this one); the message is one line. */
export class PgliteDirLockedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PgliteDirLockedError';
  }
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

function startTicksOf(pid: number | 'self'): string | undefined {
  const stat = readText(`/proc/${pid}/stat`);
  // Field 2 (the command name, in parentheses) may contain spaces: count from the last ')'; field 3 is index 0.
  return stat?.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
}

let self: Omit<LockRecord, 'token'> | undefined;

function identity(): Omit<LockRecord, 'token'> {
  if (!self) {
    let pidNamespace: string | undefined;
    try {
      pidNamespace = readlinkSync('/proc/self/ns/pid');
    } catch {
      pidNamespace = undefined;
    }
    self = {
      pid: process.pid,
      hostname: hostname(),
      startedAt: new Date(Date.now() - process.uptime() * 1000).toISOString(),
      bootId: readText('/proc/sys/kernel/random/boot_id')?.trim(),
      pidNamespace,
      startTicks: startTicksOf('self'),
    };
  }
  return self;
}

function parseRecord(text: string): LockRecord | undefined {
  try {
    const r = JSON.parse(text) as LockRecord;
    return Number.isInteger(r.pid) && r.pid > 0 && typeof r.hostname === 'string' && typeof r.token === 'string' ? r : undefined;
  } catch {
    return undefined;
  }
}

function pidExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

type Verdict = 'gone' | 'alive' | 'unchecked';

/** Whether the holder of a lock is gone; `refreshedAgoMs` is the age of the file's mtime. */
function judge(record: LockRecord | undefined, refreshedAgoMs: number): Verdict {
  const me = identity();
  const byRefresh = (alive: Verdict): Verdict => (refreshedAgoMs > ABANDONED_AFTER_MS ? 'gone' : alive);
  if (!record || record.hostname !== me.hostname) return byRefresh('unchecked');
  if (record.bootId && me.bootId && record.bootId !== me.bootId) return 'gone';
  if (record.pidNamespace !== me.pidNamespace) return byRefresh('unchecked');
  // Every lock this process holds or is taking is in `held` (checked first): this is an earlier process's.
  if (record.pid === process.pid || !pidExists(record.pid)) return 'gone';
  const ticks = startTicksOf(record.pid);
  if (record.startTicks && ticks) return ticks === record.startTicks ? 'alive' : 'gone';
  // The pid exists but may be a reuse: a live holder refreshes its file.
  return byRefresh('alive');
}

function unlinkQuiet(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}

function writeDurably(path: string, text: string): void {
  const fd = openSync(path, 'wx');
  try {
    writeSync(fd, text);
    // A lock file left empty by a power cut would count as unreadable for 30 s.
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Creates `path` with the record as its whole content; false when it exists. */
function createExclusive(path: string, record: LockRecord): boolean {
  const text = `${JSON.stringify(record)}\n`;
  const tmp = `${path}.${record.token}.tmp`;
  writeDurably(tmp, text);
  try {
    linkSync(tmp, path);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    if (code === 'EEXIST') return false;
    if (!NO_HARD_LINKS.has(code)) throw err;
    try {
      writeDurably(path, text);
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw e;
    }
  } finally {
    unlinkQuiet(tmp);
  }
}

interface Found {
  text: string;
  record: LockRecord | undefined;
  refreshedAgoMs: number;
}

/** The lock file at `path`, or undefined when there is none (it was released meanwhile). */
function readLock(path: string): Found | undefined {
  try {
    const refreshedAgoMs = Date.now() - statSync(path).mtimeMs;
    const text = readFileSync(path, 'utf8');
    return { text, record: parseRecord(text), refreshedAgoMs };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Removes the stale lock whose content was `staleText`, unless another process replaced it meanwhile. */
async function removeStale(dir: string, path: string, staleText: string, record: LockRecord, subject: LockSubject): Promise<void> {
  const guard = `${path}.takeover`;
  for (let i = 0; i < TAKEOVER_ATTEMPTS; i++) {
    if (createExclusive(guard, record)) {
      try {
        if (readText(path) === staleText) unlinkQuiet(path);
      } finally {
        unlinkQuiet(guard);
      }
      return;
    }
    const other = readLock(guard);
    if (!other) continue;
    // A process that died during its takeover (a few microseconds' window).
    if (judge(other.record, other.refreshedAgoMs) === 'gone') unlinkQuiet(guard);
    else await sleep(TAKEOVER_WAIT_MS);
  }
  throw new PgliteDirLockedError(`${subject.what} in ${dir}: another process is taking over its stale lock ${guard}; try again`);
}

function lockedMessage(dir: string, path: string, found: Found, verdict: Verdict, subject: LockSubject): string {
  const r = found.record;
  if (!r) {
    return (
      `${subject.what} in ${dir} has a lock file that cannot be read (${path}, written ${Math.round(found.refreshedAgoMs / 1000)} s ago); ` +
      `it counts as abandoned ${ABANDONED_AFTER_MS / 1000} s after it was written`
    );
  }
  const holder = `pid ${r.pid} on ${r.hostname}, started ${r.startedAt}`;
  if (verdict === 'alive') {
    return `${subject.what} in ${dir} is in use by another process (${holder}); stop it first: ${subject.rule}`;
  }
  return (
    `${subject.what} in ${dir} is in use by another process (${holder}) that cannot be checked from here (another host or container); ` +
    `its lock ${path} was refreshed ${Math.round(found.refreshedAgoMs / 1000)} s ago and counts as abandoned after ${ABANDONED_AFTER_MS / 1000} s without a refresh`
  );
}

/** Locks of this process by real directory path, including ones being acquired. */
const held = new Map<string, PgliteDirLock | 'acquiring'>();
let exitHookInstalled = false;

/**
 * An exclusive lock on a PGlite data directory for this process (see above). Taken before PGlite opens
 * the directory, released after it has closed it; a process that exits without releasing removes its
 * lock file on the way out, and one that is killed leaves a lock that the next opener takes over.
 */
export class PgliteDirLock {
  private released = false;
  private readonly refresh: NodeJS.Timeout;

  private constructor(
    private readonly key: string,
    private readonly path: string,
    private readonly token: string,
    private readonly fd: number,
  ) {
    this.refresh = setInterval(() => {
      try {
        const now = new Date();
        futimesSync(this.fd, now, now);
      } catch {
        // The next refresh tries again; the lock is only judged by its mtime after 30 s.
      }
    }, REFRESH_MS);
    this.refresh.unref();
  }

  /**
   * Opens a store on `dataDir` (created if missing) holding the directory's lock, which `open` hands to
   * the store to release on close, and which is released here if opening fails. No `dataDir` (in
   * memory): no lock. Rejects with PgliteDirLockedError when another live process (or this one) holds it.
   */
  static async openWith<T>(dataDir: string | undefined, open: (lock: PgliteDirLock | undefined) => Promise<T>, subject: LockSubject = PGLITE): Promise<T> {
    let lock: PgliteDirLock | undefined;
    if (dataDir) {
      mkdirSync(dataDir, { recursive: true });
      lock = await PgliteDirLock.acquire(dataDir, subject);
    }
    try {
      return await open(lock);
    } catch (err) {
      lock?.release();
      throw err;
    }
  }

  private static async acquire(dir: string, subject: LockSubject): Promise<PgliteDirLock> {
    const shown = resolve(dir);
    const key = realpathSync(dir);
    if (held.has(key)) throw new PgliteDirLockedError(`${subject.what} in ${shown} is already open in this process (pid ${process.pid})`);
    held.set(key, 'acquiring');
    try {
      const lock = await PgliteDirLock.take(shown, key, subject);
      held.set(key, lock);
      return lock;
    } catch (err) {
      held.delete(key);
      throw err;
    }
  }

  private static async take(dir: string, key: string, subject: LockSubject): Promise<PgliteDirLock> {
    const path = join(key, LOCK_FILE);
    const record: LockRecord = { ...identity(), token: randomUUID() };
    // Each round either creates the lock, fails for a live holder, or removes a gone one; a bound all the same.
    for (let round = 0; round < 10; round++) {
      if (createExclusive(path, record)) {
        installExitHook();
        return new PgliteDirLock(key, path, record.token, openSync(path, 'r+'));
      }
      const found = readLock(path);
      if (!found) continue;
      const verdict = judge(found.record, found.refreshedAgoMs);
      if (verdict !== 'gone') throw new PgliteDirLockedError(lockedMessage(dir, path, found, verdict, subject));
      await removeStale(dir, path, found.text, record, subject);
    }
    throw new PgliteDirLockedError(`${subject.what} in ${dir}: could not take its lock ${path} (other processes keep taking it)`);
  }

  /** Removes the lock file if it is still this lock's. Idempotent. */
  release(): void {
    if (this.released) return;
    this.released = true;
    clearInterval(this.refresh);
    try {
      closeSync(this.fd);
    } catch {
      // already closed
    }
    held.delete(this.key);
    const text = readText(this.path);
    if (text !== undefined && parseRecord(text)?.token === this.token) unlinkQuiet(this.path);
  }
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const lock of held.values()) if (lock !== 'acquiring') lock.release();
  });
}
