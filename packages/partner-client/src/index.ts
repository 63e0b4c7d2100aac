export {
  backoffMs,
  createPartnerClient,
  isIdempotent,
  type PartnerClient,
  type PartnerClientOptions,
  type PartnerPaths,
  type RetryOptions,
  retryAfterMs,
  type Schemas,
} from './client.js'
export {
  AuthenticationError,
  ConflictError,
  NotFoundError,
  PartnerApiError,
  PermissionError,
  RateLimitedError,
  toPartnerApiError,
  unwrap,
  ValidationError,
} from './errors.js'
export type { components, operations, paths } from './generated/openapi.js'
export {
  type TransferItem,
  type TransferManyOptions,
  type TransferResult,
  transferMany,
} from './transfer-many.js'
export {
  memoryReplayStore,
  type ReplayStore,
  type UseNotification,
  type VerifiedWebhook,
  WebhookReceiver,
  type WebhookReceiverOptions,
  WebhookReplayError,
  WebhookVerificationError,
} from './webhooks.js'
