import Fastify from 'fastify'

/**
 * The framework's own floor: Fastify with its defaults (JSON body parsed, no logger, no schema, no
 * hooks) answering every verify call with the same fixed body as the bare node:http baseline.
 */
const body = process.env.BASELINE_BODY ?? '{"valid":true,"claims":{}}'
const app = Fastify()
app.post('/tokens/verify', (_request, reply) => {
  reply.type('application/json; charset=utf-8').send(body)
})
app.get('/', (_request, reply) => {
  reply.type('application/json; charset=utf-8').send(body)
})
await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT) })
process.on('SIGTERM', () => {
  void app.close().then(() => process.exit(0))
})
