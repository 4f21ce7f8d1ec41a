import { createServer, connect, type Server, type Socket } from 'node:net';

export type FaultMode = 'pass' | 'down' | 'frozen';

/**
 * A loopback TCP proxy in front of a real server (Postgres, Redis) that can take it away the ways
 * production does, without stopping the server other suites share:
 * - `down`: every open connection is reset and new ones are closed at once (a stopped server);
 * - `frozen`: connections stay open and new ones are accepted, but not one byte passes either way
 *   (a SIGSTOPped server, a network partition that drops packets);
 * - `pass`: bytes flow again; what was held while frozen is delivered.
 */
export class FaultProxy {
  mode: FaultMode = 'pass';
  /** Connections accepted so far (each one the client opened). */
  accepted = 0;
  private readonly pairs = new Set<{ client: Socket; upstream: Socket; held: Array<[Socket, Buffer]> }>();
  private server!: Server;
  port = 0;

  private constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  /** Proxies to the host and port of `url` (postgres://… or redis://…). */
  static async start(url: string): Promise<FaultProxy> {
    const u = new URL(url);
    const p = new FaultProxy(u.hostname, Number(u.port));
    await p.listen();
    return p;
  }

  /** `url` with its port replaced by the proxy's. */
  urlFor(url: string): string {
    const u = new URL(url);
    u.port = String(this.port);
    return u.toString();
  }

  set(mode: FaultMode): void {
    this.mode = mode;
    if (mode === 'down') {
      for (const p of this.pairs) {
        p.client.destroy();
        p.upstream.destroy();
      }
      this.pairs.clear();
    }
    if (mode === 'pass') {
      for (const p of this.pairs) {
        for (const [to, chunk] of p.held.splice(0)) to.write(chunk);
      }
    }
  }

  async close(): Promise<void> {
    this.set('down');
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  private listen(): Promise<void> {
    this.server = createServer((client) => this.accept(client));
    return new Promise((resolve) => {
      this.server.listen(0, '127.0.0.1', () => {
        this.port = (this.server.address() as { port: number }).port;
        resolve();
      });
    });
  }

  private accept(client: Socket): void {
    this.accepted++;
    client.on('error', () => undefined);
    if (this.mode === 'down') {
      client.destroy();
      return;
    }
    const upstream = connect(this.targetPort, this.targetHost);
    upstream.on('error', () => client.destroy());
    const pair = { client, upstream, held: [] as Array<[Socket, Buffer]> };
    this.pairs.add(pair);
    const forward = (from: Socket, to: Socket) =>
      from.on('data', (chunk: Buffer) => {
        if (this.mode === 'frozen') pair.held.push([to, chunk]);
        else to.write(chunk);
      });
    forward(client, upstream);
    forward(upstream, client);
    const end = () => {
      this.pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end);
    upstream.on('close', end);
  }
}
