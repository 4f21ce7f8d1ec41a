/**
 * The firewall's own regular-expression engine (docs/architecture.md "The firewall's linear-time
 * matcher": no rule may backtrack catastrophically). Rather than guess which backtracking patterns are
 * safe, firewall patterns run on a linear-time matcher: the pattern is parsed (pattern-parser.ts),
 * compiled to a Thompson NFA (pattern-compiler.ts) and simulated over the text with one set of states
 * per position (pattern-matcher.ts), so matching costs O(text length × pattern states) whatever the
 * pattern. The price is a restricted language (README "Configuration", `firewall.rules[]`): no
 * backreferences, no lookaround, counted repetition up to 1000, at most MAX_STATES compiled states.
 * Anything outside it is refused at start-up with the reason.
 *
 * A pure library of its own: the config loader checks patterns with it and the routing firewall runs
 * them, neither depending on the other. Semantics follow JavaScript's `u` mode where both have the
 * construct; matches are leftmost-longest (not leftmost-first), which only changes which span a
 * `redact` rule replaces.
 */
import { FirewallPattern } from './pattern-matcher';
import { FirewallPatternError } from './pattern-parser';

export { MAX_STATES } from './pattern-compiler';
export { FirewallPattern, FirewallPatternError };

/** Why a pattern is refused (config error text, naming the construct), or undefined when it is accepted. */
export function firewallPatternProblem(pattern: string): string | undefined {
  try {
    FirewallPattern.compile(pattern);
    return undefined;
  } catch (err) {
    if (err instanceof FirewallPatternError) return describePatternError(err);
    throw err;
  }
}

/** The config-error text for a refused pattern. */
export const describePatternError = (err: FirewallPatternError): string =>
  `invalid regular expression for the firewall's linear-time matcher: ${err.message}`;
