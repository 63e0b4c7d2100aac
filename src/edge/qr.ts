import QRCode from 'qrcode'

/**
 * QR images of ticket codes. Error correction M (15 %) keeps a code of about 300 characters at
 * version 13 or below, which phone screens and printed e-mails render large enough for gate cameras.
 */
const OPTIONS = { errorCorrectionLevel: 'M', margin: 2, width: 320 } as const

export const qrPng = (code: string): Promise<Buffer> => QRCode.toBuffer(code, { ...OPTIONS, type: 'png' })

export const qrDataUrl = (code: string): Promise<string> =>
  QRCode.toDataURL(code, { ...OPTIONS, type: 'image/png' })
