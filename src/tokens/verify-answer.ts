import type { Claims } from './claims.js'

const INVALID = '{"valid":false,"claims":null}'

/**
 * The JSON text of POST /tokens/verify answers (`{"valid":…,"claims":…}`), shared by the route and
 * the verify lane. A valid answer's text is built once per claims object, which JwtCodec keeps for as
 * long as it remembers the token, so a repeated token costs no serialisation.
 */
export function verifyAnswers() {
  const texts = new WeakMap<Claims, string>()
  return (claims: Claims | null): string => {
    if (claims === null) return INVALID
    let text = texts.get(claims)
    if (text === undefined) {
      text = `{"valid":true,"claims":${JSON.stringify(claims)}}`
      texts.set(claims, text)
    }
    return text
  }
}

export type VerifyAnswers = ReturnType<typeof verifyAnswers>
