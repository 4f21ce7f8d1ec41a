import { resolveLocale } from './accept-language';

describe('resolveLocale (Accept-Language → Content-Language)', () => {
  it.each([
    [undefined, 'en'],
    ['', 'en'],
    ['pt', 'pt'],
    ['pt-BR', 'pt'],
    ['PT-br', 'pt'],
    ['pt-PT,pt;q=0.9', 'pt'],
    ['en', 'en'],
    ['en-GB', 'en'],
    ['fr', 'en'],
    ['fr-CA, de;q=0.9', 'en'],
    ['*', 'en'],
    ['portuguese', 'en'],
    ['ptx', 'en'],
    // q-values honoured: the highest wins, whatever the order.
    ['en;q=0.5, pt-BR;q=0.9', 'pt'],
    ['pt;q=0.4, en;q=0.8', 'en'],
    ['fr, pt;q=0.1', 'pt'],
    ['en;q=0, pt', 'pt'],
    ['pt;q=0, en;q=0.1', 'en'],
    ['pt;q=0', 'en'],
    ['pt;q=0.000', 'en'],
    ['pt;q=0.001', 'pt'],
    // Equal q: the earlier one.
    ['pt-BR, en', 'pt'],
    ['en, pt-BR', 'en'],
    ['pt;q=0.7, en;q=0.7', 'pt'],
    // A malformed q makes that entry unacceptable rather than preferred.
    ['pt;q=banana, en;q=0.2', 'en'],
    ['pt;q=2, en;q=0.2', 'en'],
    ['pt;q=1.0, en', 'pt'],
    [' pt-BR ; q=0.8 , en ; q=0.3 ', 'pt'],
    ['*;q=0.9, pt;q=0.5', 'en'],
    [['fr', 'pt-BR;q=0.5'], 'pt'],
  ] as Array<[string | string[] | undefined, string]>)('%j → %s', (header, expected) => {
    expect(resolveLocale(header)).toBe(expected);
  });
});
