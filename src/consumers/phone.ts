import { parsePhoneNumberFromString } from 'libphonenumber-js/max'
import { ValidationFailed } from '../platform/errors.js'

/**
 * The E.164 form of a phone number given in international format (`+<country code> <number>`,
 * spaces and dashes allowed). The full metadata set is used so that numbers of a valid length but
 * impossible for their country are refused too. Anything else is a 422 on `body.phone`.
 */
export function normalizePhone(raw: string, field = 'phone'): string {
  const parsed = parsePhoneNumberFromString(raw.trim())
  if (!parsed?.isValid())
    throw new ValidationFailed([
      {
        loc: ['body', field],
        msg: 'Value error, not a valid phone number in international format (+<country code><number>)',
        type: 'value_error',
        input: raw.length > 100 ? `${raw.slice(0, 100)}…` : raw,
      },
    ])
  return parsed.number
}
