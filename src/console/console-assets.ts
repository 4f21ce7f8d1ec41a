import { Injectable, OnModuleInit } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import { AppLogger } from '../common/logging/logger';
import { AppConfig } from '../config/app-config';

/** Where `npm run build:console` (scripts/build-console.js) writes the console: console/dist at the repository root. */
export const CONSOLE_DIST = join(__dirname, '..', '..', 'console', 'dist');

/**
 * The console's responses: its code only from this origin, its data only from this origin's API
 * (docs/architecture.md "Console"). No inline script or style element is ever needed: the build
 * emits files, and the UI sets styles through the DOM's style properties, which CSP allows.
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.json': 'application/json',
  '.png': 'image/png',
  '.txt': 'text/plain; charset=utf-8',
};

/** Content encodings the build writes beside each file (name.br, name.gz), best first. */
const ENCODINGS = [
  { name: 'br', suffix: '.br' },
  { name: 'gzip', suffix: '.gz' },
] as const;

export interface ConsoleFile {
  type: string;
  /** Hashed build output (under assets/): its name changes whenever its bytes do. */
  immutable: boolean;
  /** The bytes per content encoding ('identity' always). */
  bodies: Map<string, Buffer>;
  etag: string;
}

/** What one request gets: the file's bytes in the encoding chosen, and its headers. */
export interface ConsoleReply {
  status: 200 | 304;
  headers: Record<string, string>;
  body: Buffer | null;
}

/**
 * The built console, held in memory: a few hundred KB read once at start-up, so serving it costs
 * no disk read and the API routes nothing at all (they never reach this code). Files the build
 * precompressed are served by content negotiation; nothing is compressed per request.
 */
@Injectable()
export class ConsoleAssets implements OnModuleInit {
  private files = new Map<string, ConsoleFile>();

  constructor(
    private readonly config: AppConfig,
    private readonly logger: AppLogger,
  ) {}

  /** Whether /console answers at all (`console.enabled`). */
  get enabled(): boolean {
    return this.config.gateway.console.enabled;
  }

  /** Whether a build was found at start-up. */
  get built(): boolean {
    return this.files.has('index.html');
  }

  onModuleInit(): void {
    if (!this.enabled) return;
    this.files = loadDir(CONSOLE_DIST);
    if (!this.built) this.logger.pino.warn({ dir: CONSOLE_DIST }, 'console not built: /console answers 404 until `npm run build:console` has run');
  }

  /**
   * The reply for a path under /console ('' = the page itself), or null when there is no such file.
   * `accept` is the request's Accept-Encoding, `ifNoneMatch` its If-None-Match.
   */
  reply(path: string, accept: string | undefined, ifNoneMatch: string | undefined): ConsoleReply | null {
    const file = this.files.get(path === '' ? 'index.html' : path);
    if (!file) return null;
    const encoding = negotiate(accept, file);
    const etag = encoding === 'identity' ? file.etag : `${file.etag.slice(0, -1)}-${encoding}"`;
    const headers: Record<string, string> = {
      'content-type': file.type,
      // Hashed assets never change under their name; the page itself is revalidated every time, so a
      // new build is picked up at the next load.
      'cache-control': file.immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
      etag,
    };
    if (file.bodies.size > 1) headers.vary = 'Accept-Encoding';
    if (encoding !== 'identity') headers['content-encoding'] = encoding;
    if (ifNoneMatch !== undefined && ifNoneMatch.split(',').some((t) => t.trim() === etag || t.trim() === '*')) {
      return { status: 304, headers, body: null };
    }
    const body = file.bodies.get(encoding)!;
    headers['content-length'] = String(body.length);
    return { status: 200, headers, body };
  }
}

/**
 * The best encoding the client accepts that the file has: br, then gzip, then the bytes as built.
 * `q=0` refuses an encoding; `*` stands for any not named.
 */
export function negotiate(accept: string | undefined, file: Pick<ConsoleFile, 'bodies'>): string {
  if (!accept) return 'identity';
  const q = new Map<string, number>();
  for (const part of accept.toLowerCase().split(',')) {
    const [name, ...params] = part.trim().split(';');
    if (!name) continue;
    const qp = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    const value = qp ? Number(qp.slice(2)) : 1;
    q.set(name.trim(), Number.isFinite(value) ? value : 0);
  }
  for (const { name } of ENCODINGS) {
    if (!file.bodies.has(name)) continue;
    const weight = q.get(name) ?? q.get('*') ?? 0;
    if (weight > 0) return name;
  }
  return 'identity';
}

/** Every file of the build by its path relative to the folder ('/' separated), with its precompressed twins. */
export function loadDir(dir: string): Map<string, ConsoleFile> {
  const files = new Map<string, ConsoleFile>();
  if (!existsSync(dir)) return files;
  const walk = (d: string): string[] =>
    readdirSync(d).flatMap((name) => {
      const full = join(d, name);
      return statSync(full).isDirectory() ? walk(full) : [full];
    });
  const all = walk(dir);
  const present = new Set(all);
  for (const full of all) {
    if (ENCODINGS.some((e) => full.endsWith(e.suffix))) continue;
    const type = TYPES[extname(full)];
    if (!type) continue;
    const rel = relative(dir, full).split(sep).join('/');
    const identity = readFileSync(full);
    const bodies = new Map<string, Buffer>([['identity', identity]]);
    for (const e of ENCODINGS) {
      if (present.has(full + e.suffix)) bodies.set(e.name, readFileSync(full + e.suffix));
    }
    const etag = `"${createHash('sha256').update(identity).digest('base64url').slice(0, 22)}"`;
    files.set(rel, { type, immutable: rel.startsWith('assets/'), bodies, etag });
  }
  return files;
}
