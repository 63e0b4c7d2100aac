export {
  bearerToken,
  DEFAULT_TOKEN_TYPES,
  type EventRef,
  type GuardOptions,
  grants,
  type ScopeRequirement,
} from './guard.js'
export {
  createVerifier,
  type VerifiedClaims,
  type Verifier,
  VerifierError,
  type VerifierErrorKind,
  type VerifierOptions,
} from './verifier.js'
