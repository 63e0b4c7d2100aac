import { availableParallelism } from 'node:os'
import { crc32, deflateSync } from 'node:zlib'
import { Piscina } from 'piscina'
import QRCode from 'qrcode'

/**
 * QR images of ticket codes (and of device set-up codes). Error correction M (15 %) keeps a code of
 * about 300 characters at version 13 or below, which phone screens and printed e-mails render large
 * enough for gate cameras. The text is encoded in byte mode: the qrcode package's search for a
 * cheaper mix of modes (a graph of the text's segments) cost a millisecond a code and gave the codes
 * of this service no smaller symbol.
 */
const symbolOf = (code: string) =>
  QRCode.create([{ data: Buffer.from(code), mode: 'byte' }], { errorCorrectionLevel: 'M' }).modules

/** Light modules around the symbol (the quiet zone). */
const MARGIN = 2
/** The widest image: as many whole pixels per module as fit. */
const MAX_WIDTH = 320

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])

function pngChunk(type: string, data: Buffer): Buffer {
  const chunk = Buffer.alloc(12 + data.length)
  chunk.writeUInt32BE(data.length, 0)
  chunk.write(type, 4, 'latin1')
  data.copy(chunk, 8)
  chunk.writeUInt32BE(crc32(chunk.subarray(4, 8 + data.length)), 8 + data.length)
  return chunk
}

/**
 * The PNG of a QR code: 1-bit greyscale, whole pixels per module, rows unfiltered. A module row is
 * drawn once and copied for its pixel rows. The qrcode package's own PNG (an RGBA image scaled to
 * exactly 320 px, run through pngjs's per-row filter search) cost about 6 ms of CPU an image, most of
 * an on-sale's e-mail work; this one costs a small part of a millisecond and is a tenth of its size.
 */
export function qrPng(code: string): Buffer {
  const { size, data } = symbolOf(code)
  const scale = Math.max(1, Math.floor(MAX_WIDTH / (size + 2 * MARGIN)))
  const width = (size + 2 * MARGIN) * scale
  const stride = 1 + Math.ceil(width / 8)
  // Bit 1 is light: every pixel starts light, each dark module clears its bits.
  const raw = Buffer.alloc(stride * width, 0xff)
  for (let r = 0; r < size; r++) {
    const first = (MARGIN + r) * scale * stride
    for (let c = 0; c < size; c++) {
      if (!data[r * size + c]) continue
      for (let x = (MARGIN + c) * scale; x < (MARGIN + c + 1) * scale; x++)
        raw[first + 1 + (x >> 3)]! &= ~(0x80 >> (x & 7))
    }
    for (let k = 1; k < scale; k++) raw.copy(raw, first + k * stride, first, first + stride)
  }
  for (let y = 0; y < width; y++) raw[y * stride] = 0 // filter type None
  const header = Buffer.alloc(13)
  header.writeUInt32BE(width, 0)
  header.writeUInt32BE(width, 4)
  header.set([1, 0, 0, 0, 0], 8) // bit depth 1, greyscale, deflate, no filter method, no interlace
  return Buffer.concat([
    PNG_SIGNATURE,
    pngChunk('IHDR', header),
    pngChunk('IDAT', deflateSync(raw)),
    pngChunk('IEND', Buffer.alloc(0)),
  ])
}

export const qrDataUrl = (code: string): string => `data:image/png;base64,${qrPng(code).toString('base64')}`

/** Renders QR images away from the event loop; closed with the app. */
export interface QrRenderer {
  /** The images of several codes (an e-mail's tickets), in their order, as one task of a worker. */
  pngs(codes: string[]): Promise<Buffer[]>
  close(): Promise<void>
}

/**
 * QR images on worker threads (`qr-worker.ts`). One image costs 1 to 3 ms of CPU (the symbol: its
 * error correction and the choice of mask); the grouped transfer e-mails of an on-sale render
 * thousands of them, which on the event loop would hold up every request of the process. Half the
 * CPUs at most, so that the requests keep the others. An e-mail's images are one task: handing a task
 * to a worker costs the event loop about a fifth of a millisecond, as much as a tenth of an image.
 */
export function qrRenderer(): QrRenderer {
  const pool = new Piscina<string[], Uint8Array[]>({
    filename: new URL('./qr-worker.js', import.meta.url).href,
    maxThreads: Math.max(1, Math.floor(availableParallelism() / 2)),
    minThreads: 0,
    idleTimeout: 30_000,
  })
  return {
    async pngs(codes) {
      if (codes.length === 0) return []
      const images = await pool.run(codes)
      return images.map((bytes) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength))
    },
    // Waits for the images being rendered: a job stopping with the app finishes its e-mail.
    close: () => pool.close(),
  }
}

/** A QR code in text for a terminal (two modules per character row), as `wristband device setup-code` prints it. */
export const qrTerminal = (text: string): Promise<string> =>
  QRCode.toString(text, { type: 'terminal', small: true, errorCorrectionLevel: 'M' })
