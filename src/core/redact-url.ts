// The one redaction of credentials in URLs, for everything the proxy shows or logs (health, start-up lines,
// errors, summaries): `user:password@` and secret query values become `***`. Pure; it never shortens more.

/** Query parameters whose values are credentials. */
const SECRET_PARAM =
  /^(?:.*[-_.])?(?:key|apikey|api-key|token|secret|password|passwd|pwd|auth|authorization|signature|sig|credential|credentials|access_token|code)$/i;

/** A URL's scheme and authority with user information: `scheme://user[:password]@`. */
const USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@]*@/gi;
/** A query parameter (`?name=value` or `&name=value`) anywhere in a text. */
const QUERY_PARAM = /([?&])([^=&#\s]+)=([^&#\s]*)/g;

/**
 * `text` with the credentials of every URL in it redacted: the user information of `scheme://user:pw@host`
 * becomes `***@`, and the value of a query parameter named like a credential (`key`, `token`, `api_key`,
 * `signature`, …) becomes `***`. Works on a bare URL, a string that fails to parse as one, and free text
 * (an error message naming the URL).
 */
export function redactUrl(text: string): string {
  if (!text.includes('@') && !text.includes('=')) return text;
  return text
    .replace(USERINFO, '$1***@')
    .replace(QUERY_PARAM, (all, sep: string, name: string) =>
      SECRET_PARAM.test(safeDecode(name)) ? `${sep}${name}=***` : all,
    );
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
