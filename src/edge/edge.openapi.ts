/** What the OpenAPI document says about the edge routes beyond their schemas, which give their operationIds. */
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const EDGE_OPENAPI: FeatureOpenApi = {
  tags: {
    offline: 'Offline scanning at the gate: the edge key set and the scanner sync feed',
  },
}
