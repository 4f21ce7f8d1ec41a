import type { Caller } from '../http/request-context';

/** Port the API-key guard uses; tenancy implements it (keeps common/ free of store imports). */
export abstract class ApiKeyAuthenticator {
  abstract authenticate(plainKey: string): Promise<Caller | null>;
}
