/**
 * The signed-in admin key. Kept in sessionStorage only (gone when the tab closes, never shared with
 * other tabs, never in a cookie or a URL) and sent as the bearer header of every API call.
 */
const STORAGE_KEY = 'gateway-console.key';

export function storedKey(): string | null {
  try {
    return sessionStorage.getItem(STORAGE_KEY);
  } catch {
    return null;
  }
}

export function storeKey(key: string): void {
  sessionStorage.setItem(STORAGE_KEY, key);
}

export function forgetKey(): void {
  try {
    sessionStorage.removeItem(STORAGE_KEY);
  } catch {
    // Storage refused (private mode): nothing was kept.
  }
}
