import { availableParallelism } from 'node:os'
import { Piscina } from 'piscina'
import QRCode from 'qrcode'

/**
 * QR images of ticket codes (and of device set-up codes). Error correction M (15 %) keeps a code of
 * about 300 characters at version 13 or below, which phone screens and printed e-mails render large
 * enough for gate cameras.
 */
const OPTIONS = { errorCorrectionLevel: 'M', margin: 2, width: 320 } as const

export const qrPng = (code: string): Promise<Buffer> => QRCode.toBuffer(code, { ...OPTIONS, type: 'png' })

export const qrDataUrl = (code: string): Promise<string> =>
  QRCode.toDataURL(code, { ...OPTIONS, type: 'image/png' })

/** Renders QR images away from the event loop; closed with the app. */
export interface QrRenderer {
  png(code: string): Promise<Buffer>
  close(): Promise<void>
}

/**
 * QR images on worker threads (`qr-worker.ts`). One image costs 10 to 50 ms of CPU, almost all of it
 * in the PNG encoder; the grouped transfer e-mails of an on-sale render thousands of them, which on
 * the event loop held up every request of the process (10,000 transfers went from 6 s to 54 s).
 * Half the CPUs at most, so that the requests keep the others.
 */
export function qrRenderer(): QrRenderer {
  const pool = new Piscina<string, Uint8Array>({
    filename: new URL('./qr-worker.js', import.meta.url).href,
    maxThreads: Math.max(1, Math.floor(availableParallelism() / 2)),
    minThreads: 0,
    idleTimeout: 30_000,
  })
  return {
    async png(code) {
      const bytes = await pool.run(code)
      return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
    },
    // Waits for the images being rendered: a job stopping with the app finishes its e-mail.
    close: () => pool.close(),
  }
}

/** A QR code in text for a terminal (two modules per character row), as `wristband device setup-code` prints it. */
export const qrTerminal = (text: string): Promise<string> =>
  QRCode.toString(text, { type: 'terminal', small: true, errorCorrectionLevel: 'M' })
