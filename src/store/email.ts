/**
 * The form an email is indexed and looked up by (`Store.findAccountsByEmail`): trimmed and
 * lower-cased, so an operator's search matches however the address was typed at creation.
 */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}
