// The worker-thread side of qrRenderer (qr.ts): the images of one e-mail per task.
import { qrPng } from './qr.js'

export default (codes: string[]): Buffer[] => codes.map(qrPng)
