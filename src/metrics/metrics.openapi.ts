/** What the OpenAPI document says about the metrics route (its tag; the route is in the document only when served). */
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const METRICS_OPENAPI: FeatureOpenApi = {
  tags: { metrics: 'Prometheus metrics' },
}
