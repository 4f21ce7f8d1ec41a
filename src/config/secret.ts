import { inspect } from 'node:util';

/**
 * A secret value (API key, provider key, pepper). Logging, `String()`, `JSON.stringify` and
 * `util.inspect` all print a redaction; only `reveal()` gives the value.
 */
export class Secret {
  readonly #value: string;
  constructor(value: string) {
    this.#value = value;
  }
  reveal(): string {
    return this.#value;
  }
  toString(): string {
    return '[redacted]';
  }
  toJSON(): string {
    return '[redacted]';
  }
  [inspect.custom](): string {
    return 'Secret([redacted])';
  }
}
