import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');

export interface ScriptResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * One of the bench harnesses (bench/run.js, chaos.js, fuzz.js) run as a child process, the way its
 * npm script runs it, for the smoke tests: from the repository root, with only PATH and HOME (each
 * harness starts its own stores and gateway; nothing from the test run leaks in), its report written
 * to `out` in a folder of its own. `stop()` removes the folder and, only if the run was cut short,
 * sends SIGTERM (each harness stops its own children then).
 */
export function benchScript(tmpPrefix: string, reportName: string, args: (out: string) => string[]) {
  const tmp = mkdtempSync(join(tmpdir(), tmpPrefix));
  const out = join(tmp, reportName);
  let child: ChildProcess | undefined;
  return {
    out,
    async run(): Promise<ScriptResult> {
      const r: ScriptResult = { code: null, stdout: '', stderr: '' };
      child = spawn(process.execPath, args(out), {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? tmp },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stdout!.setEncoding('utf8').on('data', (s: string) => (r.stdout += s));
      child.stderr!.setEncoding('utf8').on('data', (s: string) => (r.stderr += s));
      r.code = await new Promise<number | null>((resolve) => child!.once('exit', (c) => resolve(c)));
      return r;
    },
    stop(): void {
      if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}
