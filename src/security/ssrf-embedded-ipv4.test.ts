import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { type PartnerKeys, seedPartner } from '../../test/helpers/partner.js'
import { isPublicAddress } from '../platform/http-client.js'

/**
 * An IPv6 address can carry an IPv4 address in several standard ways; each one that carries a refused
 * IPv4 address (loopback, private, link-local, metadata) is refused like that address, and the
 * deprecated IPv4-compatible block ::/96 is refused whole (nothing public lives there).
 */
const EMBEDDED_REFUSED = [
  // IPv4-compatible (::/96), as the audit sent it and in its hex spelling
  '::127.0.0.1',
  '::7f00:1',
  '::a9fe:a9fe',
  '::10.0.0.1',
  // IPv4-mapped, also in hex
  '::ffff:7f00:1',
  '::ffff:169.254.169.254',
  // SIIT (::ffff:0:0/96)
  '::ffff:0:127.0.0.1',
  // 6to4: 2002:WWXX:YYZZ::/48 carries WW.XX.YY.ZZ
  '2002:7f00:1::1',
  '2002:a9fe:a9fe::',
  '2002:c0a8:101::1',
  // NAT64, well-known prefix and local-use prefix
  '64:ff9b::127.0.0.1',
  '64:ff9b::a9fe:a9fe',
  '64:ff9b:1::7f00:1',
  // Teredo: the client address is the last 32 bits, inverted (7f000001 ^ ffffffff = 80fffffe)
  '2001:0:4136:e378:8000:63bf:80ff:fffe',
]

test('every IPv6 form that embeds an IPv4 address is refused, ::/96 whole', () => {
  for (const a of EMBEDDED_REFUSED) assert.equal(isPublicAddress(a), false, a)
  // ::/96 is deprecated (RFC 4291) and no host lives there: refused even around a public address. The
  // special-purpose ranges that embed IPv4 (6to4, NAT64, Teredo) are refused whole likewise.
  for (const a of ['::8.8.8.8', '::808:808', '2002:808:808::1', '64:ff9b::8.8.8.8', '::1:7f00:1'])
    assert.equal(isPublicAddress(a), false, a)
  // Plain global unicast, and IPv4-mapped around a public address (judged as that address), stay allowed.
  for (const a of ['2606:4700:4700::1111', '2a00:1450:4001:80b::200e', '::ffff:8.8.8.8'])
    assert.equal(isPublicAddress(a), true, a)
})

forEachBackend(httpBackends, 'SSRF guard: IPv6 forms that embed a refused IPv4 address', (ctx) => {
  let t: TestApp
  let keys: PartnerKeys
  before(async () => {
    t = ctx()
    keys = await seedPartner(t)
  })

  test('PUT /companies/webhook refuses each embedded form with 422 on body.url', async () => {
    for (const address of EMBEDDED_REFUSED) {
      const url = `http://[${address}]/hooks`
      const res = await t.request({
        method: 'PUT',
        url: '/companies/webhook',
        headers: { api_key: keys.write },
        payload: { url },
      })
      assert.equal(res.statusCode, 422, `${url}: ${res.body}`)
      assert.deepEqual(res.json().detail[0].loc, ['body', 'url'])
    }
  })
})
