import { Injectable } from '@nestjs/common';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * The Prometheus registry of this process (docs/operations.md "Metrics"). Features register their own counters on
 * `registry`; the request counters and latency histogram live here.
 */
@Injectable()
export class MetricsService {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: 'gateway_http_requests_total',
    help: 'HTTP requests by route, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [this.registry],
  });
  readonly latency = new Histogram({
    name: 'gateway_http_request_duration_seconds',
    help: 'HTTP request latency by route',
    labelNames: ['route', 'method'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  readonly storeErrors = new Counter({
    name: 'gateway_store_errors_total',
    help: 'Store calls that failed or timed out, by store',
    labelNames: ['store'] as const,
    registers: [this.registry],
  });

  readonly storeAvailable = new Gauge({
    name: 'gateway_store_available',
    help: 'Store breaker per replica: 1 while calls reach the store, 0 while they are refused until a probe succeeds',
    labelNames: ['store'] as const,
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'gateway_' });
  }

  observe(route: string, method: string, status: number, seconds: number): void {
    this.requests.inc({ route, method, status: String(status) });
    this.latency.observe({ route, method }, seconds);
  }
}
