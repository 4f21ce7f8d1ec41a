import type { Phase } from '../routing/routing.types';
import type { Locale } from './accept-language';

/**
 * The closed enum of `explanation.template_id` (docs/api.md "POST /v1/routing/explain"). Which one applies is
 * decided in explain.mapper.ts (`chooseTemplate`); the texts are below, one per locale.
 */
export const TEMPLATE_IDS = [
  'firewall_blocked',
  'no_enabled_targets',
  'exhausted',
  'single_candidate',
  'no_router',
  'weighted_draw',
  'smart_cost_cheapest',
  'cold_start',
  'shared_prior',
  'feedback_driven_high_confidence',
  'feedback_driven_moderate_confidence',
  'feedback_driven_low_confidence',
] as const;
export type TemplateId = (typeof TEMPLATE_IDS)[number];

/** Contract "Limits": explanation.text is at most 600 characters. */
export const MAX_TEXT_CHARS = 600;

/**
 * Everything a text may say. Only configuration ids (provider, model, strategy) and numbers: the
 * texts are never given the request's messages, so they cannot quote prompt content.
 */
export interface TextFacts {
  /** The would-be selection; null when nothing would be dispatched. */
  provider: string | null;
  model: string | null;
  strategy: string;
  candidates: number;
  filtered: number;
  /** The winner's score (posterior mean, smart-cost score, weighted share); null when unscored. */
  score: number | null;
  confidence: number | null;
  samples: number | null;
  top2Gap: number | null;
  explorationRate: number;
  phase: Phase | null;
  /** The change the detector found for the would-be selection (ISO `since`, rounded); null when none. */
  change?: { direction: 'drop' | 'rise'; since: string } | null;
  /** The would-be selection is a re-try of a starved or rising candidate; null when not. */
  retry?: 'starved' | 'rising' | null;
}

/** Formatted values for one locale. */
interface View {
  target: string;
  strategy: string;
  candidates: number;
  filtered: number;
  fallbacks: number;
  score: string;
  confidence: string;
  samples: string;
  gap: string;
  exploration: string;
  phase: string;
}

const PHASES: Record<Locale, Record<Phase, string>> = {
  en: { cold_start: 'cold start', learning: 'learning', steady: 'steady' },
  pt: { cold_start: 'partida a frio', learning: 'aprendizado', steady: 'estável' },
};
const UNKNOWN: Record<Locale, string> = { en: 'n/a', pt: 'n/d' };
const NUMBER_LOCALE: Record<Locale, string> = { en: 'en-US', pt: 'pt-BR' };

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

const TEXTS = {
  firewall_blocked: {
    en: (v) =>
      `The gateway firewall would block this request, so no model would be called: ${plural(v.filtered, 'candidate was', 'candidates were')} set aside with reason firewall_blocked. The same request sent to chat completions would be refused with 400 firewall_blocked.`,
    pt: (v) =>
      `O firewall do gateway bloquearia esta requisição, então nenhum modelo seria chamado: ${plural(v.filtered, 'candidato foi descartado', 'candidatos foram descartados')} com o motivo firewall_blocked. A mesma requisição enviada ao chat completions seria recusada com 400 firewall_blocked.`,
  },
  no_enabled_targets: {
    en: () => 'The routing rule that applies has no enabled target for this request, so nothing would be dispatched.',
    pt: () => 'A regra de roteamento aplicável não tem nenhum destino habilitado para esta requisição, então nada seria despachado.',
  },
  exhausted: {
    en: (v) =>
      `Every candidate was filtered out (${plural(v.filtered, 'model', 'models')} removed by constraints or unavailable providers), so the request would fail without reaching a model.`,
    pt: (v) =>
      `Todos os candidatos foram filtrados (${plural(v.filtered, 'modelo removido', 'modelos removidos')} por restrições ou provedores indisponíveis), então a requisição falharia sem chegar a um modelo.`,
  },
  single_candidate: {
    en: (v) => `Only one candidate is left, so ${v.target} would serve the request (strategy ${v.strategy}); with a single option there is nothing to compare.`,
    pt: (v) => `Resta apenas um candidato, então ${v.target} atenderia a requisição (estratégia ${v.strategy}); com uma única opção não há o que comparar.`,
  },
  no_router: {
    en: (v) =>
      `Strategy ${v.strategy} does not score models: the configured order decides, so ${v.target} would be tried first, with ${plural(v.fallbacks, 'fallback', 'fallbacks')} after it. No router was invoked, so there is no confidence figure.`,
    pt: (v) =>
      `A estratégia ${v.strategy} não pontua modelos: a ordem configurada decide, então ${v.target} seria tentado primeiro, com ${plural(v.fallbacks, 'alternativa', 'alternativas')} depois dele. Nenhum roteador foi acionado, então não há valor de confiança.`,
  },
  weighted_draw: {
    en: (v) =>
      `Strategy weighted draws one target in proportion to its configured weight; this draw picked ${v.target}, which holds ${v.score} of the weight, with ${plural(v.fallbacks, 'fallback', 'fallbacks')} after it. No learning router was invoked.`,
    pt: (v) =>
      `A estratégia weighted sorteia um destino na proporção do peso configurado; este sorteio escolheu ${v.target}, que detém ${v.score} do peso, com ${plural(v.fallbacks, 'alternativa', 'alternativas')} depois dele. Nenhum roteador de aprendizado foi acionado.`,
  },
  smart_cost_cheapest: {
    en: (v) =>
      `Strategy smart_cost picks the cheapest candidate whose score is within tolerance of the best: ${v.target} (score ${v.score}). Confidence ${v.confidence} from ${v.samples} samples; the gap to the runner-up is ${v.gap}.`,
    pt: (v) =>
      `A estratégia smart_cost escolhe o candidato mais barato cuja pontuação está dentro da tolerância da melhor: ${v.target} (pontuação ${v.score}). Confiança de ${v.confidence} a partir de ${v.samples} amostras; a diferença para o segundo colocado é ${v.gap}.`,
  },
  cold_start: {
    en: (v) =>
      `Strategy feedback_driven is in its cold start (${v.samples} samples for the leader), so ${v.target} is chosen mostly from prior quality. Confidence is capped at ${v.confidence}; live traffic would explore other models ${v.exploration} of the time.`,
    pt: (v) =>
      `A estratégia feedback_driven está em partida a frio (${v.samples} amostras para o líder), então ${v.target} é escolhido principalmente pela qualidade a priori. A confiança fica limitada a ${v.confidence}; o tráfego real exploraria outros modelos em ${v.exploration} das vezes.`,
  },
  shared_prior: {
    en: (v) =>
      `This organisation has few samples of its own (${v.samples}), so the cross-organisation pool served as the prior: ${v.target} would be selected with confidence ${v.confidence}, capped because the pool is not this organisation's own evidence (phase ${v.phase}).`,
    pt: (v) =>
      `Esta organização tem poucas amostras próprias (${v.samples}), então o conjunto compartilhado entre organizações serviu de referência a priori: ${v.target} seria selecionado com confiança de ${v.confidence}, limitada porque esse conjunto não é evidência da própria organização (fase ${v.phase}).`,
  },
  feedback_driven_high_confidence: {
    en: (v) =>
      `Strategy feedback_driven would select ${v.target} with high confidence (${v.confidence}): it leads the runner-up by ${v.gap} in score over ${v.samples} samples (phase ${v.phase}). Live traffic would explore other models ${v.exploration} of the time.`,
    pt: (v) =>
      `A estratégia feedback_driven selecionaria ${v.target} com alta confiança (${v.confidence}): ele supera o segundo colocado em ${v.gap} de pontuação ao longo de ${v.samples} amostras (fase ${v.phase}). O tráfego real exploraria outros modelos em ${v.exploration} das vezes.`,
  },
  feedback_driven_moderate_confidence: {
    en: (v) =>
      `Strategy feedback_driven would select ${v.target} with moderate confidence (${v.confidence}): its lead of ${v.gap} over the runner-up is not yet decisive after ${v.samples} samples (phase ${v.phase}). Live traffic would explore other models ${v.exploration} of the time.`,
    pt: (v) =>
      `A estratégia feedback_driven selecionaria ${v.target} com confiança moderada (${v.confidence}): a vantagem de ${v.gap} sobre o segundo colocado ainda não é decisiva após ${v.samples} amostras (fase ${v.phase}). O tráfego real exploraria outros modelos em ${v.exploration} das vezes.`,
  },
  feedback_driven_low_confidence: {
    en: (v) =>
      `Strategy feedback_driven leans towards ${v.target} with low confidence (${v.confidence}): the top two candidates are close (gap ${v.gap}) or outcomes vary widely after ${v.samples} samples (phase ${v.phase}). Live traffic would explore other models ${v.exploration} of the time.`,
    pt: (v) =>
      `A estratégia feedback_driven tende a ${v.target} com baixa confiança (${v.confidence}): os dois primeiros candidatos estão próximos (diferença de ${v.gap}) ou os resultados variam muito após ${v.samples} amostras (fase ${v.phase}). O tráfego real exploraria outros modelos em ${v.exploration} das vezes.`,
  },
} satisfies Record<TemplateId, Record<Locale, (v: View) => string>>;

function view(f: TextFacts, locale: Locale): View {
  const fmt = (n: number | null, digits: number, style: 'decimal' | 'percent' = 'decimal') =>
    n === null || !Number.isFinite(n)
      ? UNKNOWN[locale]
      : new Intl.NumberFormat(NUMBER_LOCALE[locale], { style, maximumFractionDigits: digits, minimumFractionDigits: 0 }).format(n);
  return {
    target: f.provider !== null && f.model !== null ? `${f.provider}/${f.model}` : UNKNOWN[locale],
    strategy: f.strategy,
    candidates: f.candidates,
    filtered: f.filtered,
    fallbacks: Math.max(0, f.candidates - 1),
    score: fmt(f.score, 3, f.strategy === 'weighted' ? 'percent' : 'decimal'),
    confidence: fmt(f.confidence, 0, 'percent'),
    samples: fmt(f.samples, 0),
    gap: fmt(f.top2Gap, 3),
    exploration: fmt(f.explorationRate, 1, 'percent'),
    phase: f.phase === null ? UNKNOWN[locale] : PHASES[locale][f.phase],
  };
}

/** Cuts to at most `max` characters (code points), ending with an ellipsis when it cut. */
export function capText(text: string, max = MAX_TEXT_CHARS): string {
  const chars = Array.from(text);
  return chars.length <= max ? text : `${chars.slice(0, max - 1).join('')}…`;
}

/*
 * Sentences added after the template's text (the template ids stay the contract's closed enum): a
 * re-try of a starved or rising candidate, and a change the detector found for the selection.
 */
const RETRY: Record<Locale, Record<'starved' | 'rising', (v: View) => string>> = {
  en: {
    starved: (v) => `This pick is a re-try: ${v.target} had been starved of traffic, and a small bounded share of requests goes back to such a model so an improvement can be seen.`,
    rising: (v) => `This pick is a re-try: the latest answers of ${v.target} are being tested against its record for a rise, and a small bounded share of requests follows it up until the test decides.`,
  },
  pt: {
    starved: (v) => `Esta escolha é uma nova tentativa: ${v.target} estava sem tráfego, e uma pequena fração limitada das requisições volta a um modelo assim para que uma melhora possa ser vista.`,
    rising: (v) => `Esta escolha é uma nova tentativa: as respostas recentes de ${v.target} estão sendo testadas contra o seu histórico em busca de uma melhora, e uma pequena fração limitada das requisições o acompanha até o teste decidir.`,
  },
};
const CHANGE: Record<Locale, Record<'drop' | 'rise', (v: View, since: string) => string>> = {
  en: {
    drop: (v, since) => `A change was detected: the quality of ${v.target} dropped around ${since}, so its statistics restart from that point.`,
    rise: (v, since) => `A change was detected: the quality of ${v.target} rose around ${since}, so its statistics restart from that point.`,
  },
  pt: {
    drop: (v, since) => `Uma mudança foi detectada: a qualidade de ${v.target} caiu por volta de ${since}, então suas estatísticas recomeçam a partir desse ponto.`,
    rise: (v, since) => `Uma mudança foi detectada: a qualidade de ${v.target} subiu por volta de ${since}, então suas estatísticas recomeçam a partir desse ponto.`,
  },
};

/** An ISO time as `YYYY-MM-DD HH:MM UTC` (the same in both locales: ids and numbers only). */
const utcMinute = (iso: string) => `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;

export function renderExplanation(id: TemplateId, facts: TextFacts, locale: Locale): string {
  const v = view(facts, locale);
  const parts = [TEXTS[id][locale](v)];
  if (facts.retry) parts.push(RETRY[locale][facts.retry](v));
  if (facts.change) parts.push(CHANGE[locale][facts.change.direction](v, utcMinute(facts.change.since)));
  return capText(parts.join(' '));
}
