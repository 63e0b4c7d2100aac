export { bearerToken, type EventRef, grants, type ScopeRequirement } from './guard.js'
export {
  createVerifier,
  type VerifiedClaims,
  type Verifier,
  VerifierError,
  type VerifierErrorKind,
  type VerifierOptions,
} from './verifier.js'
