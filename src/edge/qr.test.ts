import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { describe, test } from 'node:test'
import { crc32, inflateSync } from 'node:zlib'
import QRCode from 'qrcode'
import { qrDataUrl, qrPng, qrRenderer } from './qr.js'

/** Reads a PNG as the PNG specification lays it out: its chunks (each CRC checked), the header, and the pixels of a 1-bit greyscale image without filters. */
function readPng(png: Buffer) {
  assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'PNG signature')
  const chunks: { type: string; data: Buffer }[] = []
  for (let at = 8; at < png.length; ) {
    const length = png.readUInt32BE(at)
    const typed = png.subarray(at + 4, at + 8 + length)
    assert.equal(png.readUInt32BE(at + 8 + length), crc32(typed), 'chunk CRC')
    chunks.push({ type: typed.subarray(0, 4).toString('latin1'), data: typed.subarray(4) })
    at += 12 + length
  }
  assert.deepEqual(
    chunks.map((c) => c.type),
    ['IHDR', 'IDAT', 'IEND'],
  )
  const header = chunks[0]!.data
  const width = header.readUInt32BE(0)
  const height = header.readUInt32BE(4)
  assert.deepEqual([...header.subarray(8)], [1, 0, 0, 0, 0], 'bit depth 1, greyscale, no interlace')
  const raw = inflateSync(chunks[1]!.data)
  const stride = 1 + Math.ceil(width / 8)
  assert.equal(raw.length, stride * height)
  /** Whether the pixel at (x, y) is dark. */
  const dark = (x: number, y: number) => {
    assert.equal(raw[y * stride], 0, 'filter type None')
    return ((raw[y * stride + 1 + (x >> 3)]! >> (7 - (x & 7))) & 1) === 0
  }
  return { width, height, dark }
}

describe('QR images', () => {
  const code = `eyJhbGciOiJFZERTQSIsImtpZCI6ImsxIiwidHlwIjoid2ItdGlja2V0In0.${randomBytes(110).toString('base64url')}.${randomBytes(64).toString('base64url')}`

  test("a ticket code's image: every module of its symbol as a square of whole pixels, a light margin of two modules, at most 320 px wide", () => {
    const { size, data } = QRCode.create([{ data: Buffer.from(code), mode: 'byte' }], {
      errorCorrectionLevel: 'M',
    }).modules
    const image = readPng(qrPng(code))
    assert.equal(image.width, image.height)
    assert.ok(image.width <= 320)
    const scale = image.width / (size + 4)
    assert.ok(Number.isInteger(scale) && scale >= 4, `${scale} pixels a module`)
    for (let y = 0; y < image.height; y++)
      for (let x = 0; x < image.width; x++) {
        const [row, col] = [Math.floor(y / scale) - 2, Math.floor(x / scale) - 2]
        const inside = row >= 0 && row < size && col >= 0 && col < size
        assert.equal(image.dark(x, y), inside && data[row * size + col] === 1, `pixel ${x},${y}`)
      }
  })

  test('the data URL holds the same PNG', () => {
    assert.equal(qrDataUrl(code), `data:image/png;base64,${qrPng(code).toString('base64')}`)
  })

  test('the worker threads render the images of several codes in their order, the same images', async () => {
    const renderer = qrRenderer()
    try {
      const codes = [code, 'https://wristband.example/devices/setup#abc', code.toUpperCase()]
      const images = await renderer.pngs(codes)
      assert.deepEqual(
        images.map((png) => png.toString('base64')),
        codes.map((c) => qrPng(c).toString('base64')),
      )
      assert.deepEqual(await renderer.pngs([]), [])
    } finally {
      await renderer.close()
    }
  })
})
