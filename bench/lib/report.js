'use strict';
/** The Markdown tables of a bench report, and the performance budget (docs/architecture.md "Performance budget") checked against it. */

const fmt = (x, digits = 2) => (x === null || x === undefined || Number.isNaN(x) ? '—' : typeof x === 'number' ? x.toFixed(digits) : String(x));
/** "median (min–max)" of a { median, min, max } summary. */
const mm = (s, digits = 2) => (s && s.median !== null && s.median !== undefined ? `${fmt(s.median, digits)} (${fmt(s.min, digits)}–${fmt(s.max, digits)})` : '—');

/** The performance budget; `met` is null when the section was not run. */
function evaluateBudget(report) {
  const chat = report.sections.chat?.levels ?? [];
  const at = (c) => chat.find((l) => l.connections === c);
  const streams = report.sections.stream?.levels ?? [];
  const mem = report.sections.memory?.levels ?? [];
  const tenK = mem.find((l) => l.requested === 10000);
  const soak = report.sections.soak;
  const gapOf = (l) => l.added_ms.between_chunks_p99.median ?? Infinity;
  const worstLevel = streams.reduce((w, l) => (w && gapOf(w) >= gapOf(l) ? w : l), null);
  const worstGap = worstLevel ? gapOf(worstLevel) : null;
  const floorNote = (l, key) => (l?.floor_added_ms ? `the Express floor of the same run: ${fmt(l.floor_added_ms[key].median, 3)} ms` : undefined);
  const item = (name, limit, value, met, note) => ({ name, limit, value: value ?? null, met: value === null || value === undefined ? null : met, ...(note ? { note } : {}) });
  const v32 = at(32);
  const v1 = at(1);
  const oneK = mem.find((l) => l.requested === 1000);
  const idle = report.sections.memory?.idle;
  const servers = /--servers/.test(report.meta.store ?? '');
  const idleLimit = servers ? 100 : 200;
  const stream1 = streams.find((l) => l.concurrency === 1);
  const vsFloor = (l) => l?.cpu_vs_floor?.median;
  return [
    item('CPU per non-streaming request / the Express floor of the same run (32 connections)', '≤ 2×', vsFloor(v32), vsFloor(v32) <= 2, v32?.floor ? `${v32.gateway.cpu_us_per_req.median} / ${v32.floor.cpu_us_per_req.median} µs` : 'needs --floor'),
    item('CPU per non-streaming request / the Express floor of the same run (1 connection)', '≤ 2×', vsFloor(v1), vsFloor(v1) <= 2, v1?.floor ? `${v1.gateway.cpu_us_per_req.median} / ${v1.floor.cpu_us_per_req.median} µs` : 'needs --floor'),
    item('added TTFB p50 at 1 stream', '< 1 ms', stream1?.added_ms.ttfb_p50.median, stream1?.added_ms.ttfb_p50.median < 1, floorNote(stream1, 'ttfb_p50')),
    item(
      `RSS idle, ${idle ? `${idle.seconds} s after` : 'after'} the warm-up's load (${servers ? 'Postgres + Redis' : 'embedded default'})`,
      `< ${idleLimit} MiB`,
      idle?.rss_idle_mib,
      idle?.rss_idle_mib < idleLimit,
      idle ? `${idle.rss_after_load_mib} MiB right after the load` : undefined,
    ),
    item('RSS added by 1,000 open slow streams', '< 100 MiB, all 1,000 open', oneK ? Math.round((oneK.rss_mib - oneK.rss_before_mib) * 10) / 10 : null, oneK ? oneK.rss_mib - oneK.rss_before_mib < 100 && oneK.open === 1000 : null),
    item('CPU per non-streaming request (32 connections)', '≤ 150 µs', v32?.gateway.cpu_us_per_req.median, v32?.gateway.cpu_us_per_req.median <= 150),
    item('added latency p50 at 1 connection', '≤ 0.5 ms', v1?.added_ms.p50.median, v1?.added_ms.p50.median <= 0.5),
    item('added latency p99 at 32 connections', '≤ 3 ms', v32?.added_ms.p99.median, v32?.added_ms.p99.median <= 3),
    item('throughput through the gateway / direct at 32 connections', '≥ 40 %', v32 ? Math.round(v32.rps_ratio.median * 1000) / 10 : null, v32?.rps_ratio.median >= 0.4),
    item('added time between chunks p99, gateway − direct (worst stream level)', '< 1 ms', worstGap, worstGap < 1, floorNote(worstLevel, 'between_chunks_p99')),
    item(
      'RSS with 10,000 concurrent slow streams',
      '< 1024 MiB, all 10,000 open',
      tenK?.rss_mib,
      tenK ? tenK.rss_mib < 1024 && tenK.open === 10000 : null,
      tenK ? `${tenK.open} of 10000 streams open; fd limit ${report.meta.fd_limit}` : undefined,
    ),
    item('soak RSS growth', '< 30 MB', soak?.rss_growth_mib, soak ? soak.rss_growth_mib * 1.048576 < 30 : null),
  ];
}

function renderMarkdown(r) {
  const m = r.meta;
  const out = [];
  out.push(`### Gateway benchmark — ${m.date.slice(0, 10)}`);
  out.push('');
  out.push(
    `\`${m.command}\` · ${m.mode} · ${m.cores} cores (${m.cpu}), ${m.memory_gib} GiB · Node ${m.node} · ${m.store} · logging: ${m.logging} · ` +
      `autocannon ${m.autocannon} · ${m.runs_per_figure} runs per figure, median (min–max), direct and gateway runs alternated`,
  );
  const chat = r.sections.chat;
  if (chat) {
    out.push('');
    out.push(`**Non-streaming chat** (${chat.seconds_per_run} s per run; latency in ms; CPU = utime+stime of the serving process / requests)`);
    out.push('');
    out.push('| conns | side | req/s | p50 | p90 | p99 | CPU µs/req | of which sys |');
    out.push('|---:|---|---:|---:|---:|---:|---:|---:|');
    for (const l of chat.levels) {
      for (const side of ['direct', ...(l.floor ? ['floor'] : []), 'gateway']) {
        const s = l[side];
        out.push(`| ${l.connections} | ${side === 'floor' ? 'Express floor' : side} | ${mm(s.rps, 0)} | ${mm(s.p50, 3)} | ${mm(s.p90, 3)} | ${mm(s.p99, 3)} | ${mm(s.cpu_us_per_req, 0)} | ${fmt(s.cpu_sys_us_per_req?.median, 0)} |`);
      }
      out.push(`| ${l.connections} | **added** | ${fmt(l.rps_ratio.median * 100, 1)} % of direct | ${mm(l.added_ms.p50, 3)} | ${mm(l.added_ms.p90, 3)} | ${mm(l.added_ms.p99, 3)} | | |`);
      if (l.floor) out.push(`| ${l.connections} | **gateway / floor** | | | | | ${mm(l.cpu_vs_floor, 2)} × | |`);
    }
  }
  const rs = r.sections.responses;
  if (rs) {
    out.push('');
    out.push(`**Responses API** (non-streaming \`POST /v1/responses\` beside chat on the same gateway, ${rs.seconds_per_run} s per run; latency in ms)`);
    out.push('');
    out.push('| conns | endpoint | req/s | p50 | p99 | CPU µs/req | responses/chat CPU |');
    out.push('|---:|---|---:|---:|---:|---:|---:|');
    for (const l of rs.levels) {
      out.push(`| ${l.connections} | chat | ${mm(l.chat.rps, 0)} | ${mm(l.chat.p50, 3)} | ${mm(l.chat.p99, 3)} | ${mm(l.chat.cpu_us_per_req, 0)} | |`);
      out.push(`| ${l.connections} | responses | ${mm(l.responses.rps, 0)} | ${mm(l.responses.p50, 3)} | ${mm(l.responses.p99, 3)} | ${mm(l.responses.cpu_us_per_req, 0)} | ${mm(l.cpu_ratio, 3)} |`);
    }
  }
  const ot = r.sections.otel;
  if (ot) {
    out.push('');
    out.push(`**OpenTelemetry** (\`--otel\`: non-streaming chat on the gateway with tracing off and on, exporting to a local OTLP sink, runs alternated, ${ot.seconds_per_run} s per run; latency in ms; goal: on/off CPU under 1.10)`);
    out.push('');
    out.push('| conns | tracing | req/s | p50 | p99 | CPU µs/req | on/off CPU |');
    out.push('|---:|---|---:|---:|---:|---:|---:|');
    for (const l of ot.levels) {
      out.push(`| ${l.connections} | off | ${mm(l.off.rps, 0)} | ${mm(l.off.p50, 3)} | ${mm(l.off.p99, 3)} | ${mm(l.off.cpu_us_per_req, 0)} | |`);
      out.push(`| ${l.connections} | on | ${mm(l.on.rps, 0)} | ${mm(l.on.p50, 3)} | ${mm(l.on.p99, 3)} | ${mm(l.on.cpu_us_per_req, 0)} | ${mm(l.cpu_ratio, 3)} |`);
    }
    out.push('');
    out.push(`Spans exported ${ot.spans.exported}, dropped ${ot.spans.dropped}; received by the sink ${ot.spans.received} in ${ot.spans.export_requests} export requests.`);
  }
  const st = r.sections.stream;
  if (st) {
    out.push('');
    out.push(
      `**Streaming** (${st.levels[0]?.chunks_per_stream} chunks ${st.levels[0]?.interval_ms} ms apart, ${st.seconds_per_run} s per run; ms; added = gateway − direct run next to it; ` +
        "transit = arrival − the fake's send time of that chunk; gap = arrival gap − send gap of two chunks; held back = chunks that arrived after the fake had sent the next one)",
    );
    out.push('');
    out.push('| streams | added TTFB p50 | added TTFB p99 | added transit p50 | added transit p99 | added gap p50 | added gap p99 | gap p99 gateway / direct | transit max gateway | chunks | held back | missing |');
    out.push('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const l of st.levels) {
      const a = l.added_ms;
      out.push(
        `| ${l.concurrency} | ${mm(a.ttfb_p50, 3)} | ${mm(a.ttfb_p99, 3)} | ${mm(a.transit_p50, 3)} | ${mm(a.transit_p99, 3)} | ${mm(a.between_chunks_p50, 3)} | ${mm(a.between_chunks_p99, 3)} | ` +
          `${fmt(l.gateway.gap_p99.median, 3)} / ${fmt(l.direct.gap_p99.median, 3)} | ${mm(l.gateway.transit_max, 2)} | ${l.totals.gateway.chunks} | ${l.totals.gateway.held} | ${l.totals.gateway.missing} |`,
      );
    }
    if (st.levels.some((l) => l.floor_added_ms)) {
      out.push('');
      out.push('The Express reference proxy (`--floor`: each event parsed and re-serialised) in the same alternation, added over the direct run next to it:');
      out.push('');
      out.push('| streams | floor added TTFB p50 | gateway added TTFB p50 | floor added gap p99 | gateway added gap p99 |');
      out.push('|---:|---:|---:|---:|---:|');
      for (const l of st.levels.filter((x) => x.floor_added_ms)) {
        out.push(`| ${l.concurrency} | ${mm(l.floor_added_ms.ttfb_p50, 3)} | ${mm(l.added_ms.ttfb_p50, 3)} | ${mm(l.floor_added_ms.between_chunks_p99, 3)} | ${mm(l.added_ms.between_chunks_p99, 3)} |`);
      }
    }
  }
  const mem = r.sections.memory;
  if (mem) {
    out.push('');
    out.push(`**Memory** (slow streams, a chunk every ${mem.chunk_every_ms} ms; gateway RSS in MiB; idle after start ${fmt(m.gateway_rss_idle_mib, 1)})`);
    out.push('');
    if (mem.idle) {
      out.push(
        `Idle after the warm-up's load: RSS ${fmt(mem.idle.rss_after_load_mib, 1)} right after it, ${fmt(mem.idle.rss_idle_mib, 1)} after ${mem.idle.seconds} s without a request (` +
          mem.idle.curve.map((c) => `${c.s} s: ${fmt(c.rss_mib, 1)}`).join(', ') +
          ').',
      );
      out.push('');
    }
    out.push('| streams asked | open | pending | errors | RSS before | RSS with streams | KiB per open stream | JS heap before → with | gateway fds | RSS after close |');
    out.push('|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|');
    for (const l of mem.levels) {
      out.push(
        `| ${l.requested} | ${l.open} | ${l.pending} | ${l.errors + l.non2xx} | ${fmt(l.rss_before_mib, 1)} | ${fmt(l.rss_mib, 1)} | ${fmt(l.rss_per_open_stream_kib, 1)} | ${fmt(l.heap_used_before_mib, 1)} → ${fmt(l.heap_used_mib, 1)} | ${l.gateway_fds} | ${fmt(l.rss_after_close_mib, 1)} |`,
      );
    }
  }
  const soak = r.sections.soak;
  if (soak) {
    out.push('');
    out.push(
      `**Soak** (${soak.seconds} s of JSON + delayed and instant streams, 1 in 20 delayed streams aborted by the client; RSS before and after = ` +
        `the lowest of ${soak.after.rss_samples ?? 1} samples 1 s apart at rest${soak.after.rss_first_sample_mib != null ? `, first samples ${fmt(soak.before.rss_first_sample_mib, 1)} and ${fmt(soak.after.rss_first_sample_mib, 1)}` : ''})`,
    );
    out.push('');
    out.push('| RSS before | RSS after | growth | peak | heap before | heap after | JSON requests | streams | aborted | non-2xx + errors |');
    out.push('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    out.push(
      `| ${fmt(soak.before.rss_mib, 1)} | ${fmt(soak.after.rss_mib, 1)} | ${fmt(soak.rss_growth_mib, 1)} | ${fmt(soak.rss_peak_mib, 1)} | ${fmt(soak.before.heap_used_mib, 1)} | ` +
        `${fmt(soak.after.heap_used_mib, 1)} | ${soak.json.requests} | ${soak.streams.completed} | ${soak.streams.aborted_by_client} | ` +
        `${soak.json.non2xx + soak.json.errors + soak.streams.non2xx + soak.streams.errors} |`,
    );
  }
  if (r.budget) {
    out.push('');
    out.push('**Budget**');
    out.push('');
    out.push('| figure | budget | now | met |');
    out.push('|---|---|---:|---|');
    for (const b of r.budget) {
      out.push(`| ${b.name} | ${b.limit} | ${fmt(b.value, 2)}${b.note ? ` (${b.note})` : ''} | ${b.met === null ? 'not run' : b.met ? 'yes' : '**no**'} |`);
    }
  }
  return out.join('\n');
}

module.exports = { renderMarkdown, evaluateBudget };
