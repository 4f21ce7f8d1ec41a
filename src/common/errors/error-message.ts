/** The message of an error, or the thrown value as text: for logs and health reasons, never client bodies. */
export const errorMessage = (err: unknown): string => (err instanceof Error ? err.message : String(err));
