import { ValidationFailed } from '../platform/errors.js'

/**
 * The E.164 form of a phone number given in international format (`+<country code> <number>`,
 * spaces and dashes allowed). The full metadata set is used so that numbers of a valid length but
 * impossible for their country are refused too. Anything else is a 422 on `body.phone`.
 */
export async function normalizePhone(raw: string, field = 'phone'): Promise<string> {
  // The metadata (93 modules) is loaded by the first number, not at start: every process of a fleet
  // pays for the code it loads before it serves, and a deployment may have no consumer sign-ins at all.
  const { parsePhoneNumberFromString } = await import('libphonenumber-js/max')
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
