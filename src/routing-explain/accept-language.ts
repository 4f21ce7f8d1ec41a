/** The locales `explanation.text` is written in (contract: `Content-Language` is `en` or `pt`). */
export const LOCALES = ['en', 'pt'] as const;
export type Locale = (typeof LOCALES)[number];
export const DEFAULT_LOCALE: Locale = 'en';

/** `pt`, `pt-BR`, `pt-PT`, … → pt; `en`, `en-GB`, … → en; anything else is not a locale we write. */
function localeOf(tag: string): Locale | undefined {
  for (const locale of LOCALES) if (tag === locale || tag.startsWith(`${locale}-`)) return locale;
  return undefined;
}

const QVALUE = /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/;

/**
 * Resolves `Accept-Language` (RFC 9110 §12.5.4) to `en` or `pt`: the supported range with the
 * highest q wins, the earlier one on a tie; q=0 means "not acceptable"; `*` stands for the
 * default. Anything unparsable or unsupported falls back to `en` (contract).
 */
export function resolveLocale(header: string | string[] | undefined): Locale {
  const text = Array.isArray(header) ? header.join(',') : header;
  if (!text) return DEFAULT_LOCALE;
  let best: { locale: Locale; q: number } | undefined;
  for (const item of text.split(',')) {
    const [rawTag, ...params] = item.split(';').map((s) => s.trim());
    const tag = rawTag.toLowerCase();
    if (tag === '') continue;
    let q = 1;
    for (const p of params) {
      const [name, value] = p.split('=').map((s) => s.trim());
      if (name.toLowerCase() !== 'q') continue;
      q = value !== undefined && QVALUE.test(value) ? Number(value) : NaN;
    }
    if (!(q > 0)) continue;
    const locale = tag === '*' ? DEFAULT_LOCALE : localeOf(tag);
    if (locale !== undefined && (best === undefined || q > best.q)) best = { locale, q };
  }
  return best?.locale ?? DEFAULT_LOCALE;
}
