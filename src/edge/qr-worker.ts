// The worker-thread side of qrRenderer (qr.ts): one QR image per task.
import { qrPng } from './qr.js'

export default (code: string): Promise<Buffer> => qrPng(code)
