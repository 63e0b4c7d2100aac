import type { FastifyBaseLogger } from 'fastify'
import type { AuditLog } from '../audit/audit.store.js'
import { consumerGrant } from '../identities/grants.js'
import { identityIssuers } from '../idp/idp.store.js'
import { type AuthEvents, counted } from '../platform/auth-events.js'
import type { Clock } from '../platform/clock.js'
import { type Db, isUniqueViolation } from '../platform/db/database.js'
import {
  BadRequestError,
  ConflictError,
  ServiceUnavailableError,
  UnauthorizedError,
} from '../platform/errors.js'
import { type PasswordSignInDeps, passwordBudget, signInWithPassword } from '../platform/password-sign-in.js'
import { hashPassword } from '../platform/passwords.js'
import { randomToken } from '../platform/random.js'
import type { BudgetedSmsSender } from '../platform/sms.js'
import type { TokenResponse, TokenService } from '../tokens/token.service.js'
import {
  type CustomerRecord,
  findCustomerCredentials,
  getCustomer,
  insertCustomer,
  insertPhoneVerification,
  updateCustomer,
  usePhoneVerification,
} from './consumers.store.js'
import { PhoneCodes } from './phone-codes.js'

/** How long a `verification_token` from /verify/messaging/check can be used to register. */
export const VERIFICATION_TOKEN_LIFETIME_MS = 15 * 60_000

const PRODUCT = 'wristband'
const INVALID_LOGIN = 'Incorrect phone number or password'
const INVALID_CODE = 'Invalid or expired code'

/** The SMS text: nothing but the code and the product name. */
export function codeMessage(code: string): string {
  return `${code} is your ${PRODUCT} code`
}

export interface ConsumerDeps {
  db: Db
  clock: Clock
  tokens: TokenService
  audit: AuditLog
  passwords: PasswordSignInDeps
  authEvents: AuthEvents
  sms: BudgetedSmsSender
  /** The key the one-time phone codes are kept under (derived from the signing secret). */
  phoneCodeKey: Buffer
  log: FastifyBaseLogger
}

export interface RegisterInput {
  phone: string
  password: string
  verification_token: string
  email?: string | undefined
  first_name?: string | undefined
  last_name?: string | undefined
}

/** A consumer as shown to itself. */
export type ConsumerView = CustomerRecord & { identity_providers: string[] }

export type ProfilePatch = Partial<Record<'email' | 'first_name' | 'last_name', string | null>>

export class ConsumerService {
  /** SMS deliveries still in flight; awaited when the app closes. */
  private readonly deliveries = new Set<Promise<void>>()
  private readonly codes: PhoneCodes

  constructor(private readonly deps: ConsumerDeps) {
    this.codes = new PhoneCodes({ db: deps.db, clock: deps.clock, key: deps.phoneCodeKey })
  }

  /** Phone and password sign-in; every failure is the same 401 after the same work. */
  loginWithPassword(phone: string, password: string, ip: string): Promise<TokenResponse> {
    return counted(this.deps.authEvents, 'login_consumer_password', () =>
      this.signInWithPassword(phone, password, ip),
    )
  }

  private async signInWithPassword(phone: string, password: string, ip: string): Promise<TokenResponse> {
    const { db, audit } = this.deps
    const found = await signInWithPassword(this.deps.passwords, {
      slots: [
        {
          backoffKey: passwordBudget('consumer', phone),
          find: () => findCustomerCredentials(db, phone),
          storeHash: (c, hash) => updateCustomer(db, c.id, { password_hash: hash }),
        },
      ],
      password,
      onFailure: () => audit.record({ kind: 'login', actor: `consumer:${phone}`, ip, outcome: 'failure' }),
      failure: INVALID_LOGIN,
    })
    await audit.record({ kind: 'login', actor: `consumer:${found.id}`, ip, outcome: 'success' })
    return this.deps.tokens.issuePair(consumerGrant(found))
  }

  /**
   * Sends a sign-in code to a registered phone. The answer and its timing are the same for an unknown
   * phone (which gets no SMS), so the endpoint does not reveal who is registered: delivery runs after
   * the answer.
   */
  async startPhoneLogin(phone: string): Promise<void> {
    // The fleet's SMS budget (SMS_GLOBAL_RATE_LIMIT) is charged for every request, registered phone
    // or not, so its 429 tells nothing about the number.
    await this.deps.sms.charge()
    const code = await this.codes.issue('login', phone)
    const known = await findCustomerCredentials(this.deps.db, phone)
    if (!known) return
    const delivery = this.deps.sms
      .sendCharged({ to: phone, text: codeMessage(code) })
      .catch((err: unknown) => this.deps.log.error({ err }, 'SMS delivery of a sign-in code failed'))
      .finally(() => this.deliveries.delete(delivery))
    this.deliveries.add(delivery)
  }

  verifyPhoneLogin(phone: string, code: string, ip: string): Promise<TokenResponse> {
    return counted(this.deps.authEvents, 'login_consumer_otp', () => this.signInWithCode(phone, code, ip))
  }

  private async signInWithCode(phone: string, code: string, ip: string): Promise<TokenResponse> {
    const { db, audit } = this.deps
    const ok = await this.codes.consume('login', phone, code)
    const customer = ok ? await findCustomerCredentials(db, phone) : undefined
    if (!customer) {
      await audit.record({ kind: 'login_otp', actor: `consumer:${phone}`, ip, outcome: 'failure' })
      throw new UnauthorizedError(INVALID_CODE)
    }
    await audit.record({ kind: 'login_otp', actor: `consumer:${customer.id}`, ip, outcome: 'success' })
    return this.deps.tokens.issuePair(consumerGrant(customer))
  }

  /** Sends a phone-ownership code. Delivery is awaited: the caller learns when the SMS did not go out. */
  async startVerification(phone: string): Promise<void> {
    // The fleet's SMS budget (SMS_GLOBAL_RATE_LIMIT) first: when it is spent, 429 and the number's
    // hourly codes are left as they were.
    await this.deps.sms.charge()
    const code = await this.codes.issue('verify', phone)
    try {
      await this.deps.sms.sendCharged({ to: phone, text: codeMessage(code) })
    } catch (err) {
      this.deps.log.error({ err }, 'SMS delivery of a verification code failed')
      throw new ServiceUnavailableError('The SMS could not be sent; try again later')
    }
  }

  /** Exchanges a correct code for a single-use `verification_token` bound to the phone. */
  async checkVerification(phone: string, code: string): Promise<string> {
    if (!(await this.codes.consume('verify', phone, code))) throw new BadRequestError(INVALID_CODE)
    const token = randomToken(32)
    const now = this.deps.clock.now()
    await insertPhoneVerification(this.deps.db, {
      token,
      phone,
      expires_at: now + VERIFICATION_TOKEN_LIFETIME_MS,
      created_at: now,
    })
    return token
  }

  /**
   * Creates a consumer for a phone proven by a `verification_token`. The token is used up in the
   * same transaction as the insert, so a taken phone (409) leaves it usable.
   */
  async register(input: RegisterInput, ip: string): Promise<TokenResponse> {
    const { db, clock, audit } = this.deps
    const passwordHash = await hashPassword(input.password)
    const now = clock.now()
    let id: number
    try {
      id = await db.transaction().execute(async (tx) => {
        if (!(await usePhoneVerification(tx, input.verification_token, input.phone, now)))
          throw new BadRequestError('Invalid or expired verification token')
        const taken = await findCustomerCredentials(tx, input.phone)
        if (taken) throw new ConflictError('Phone number already registered')
        return insertCustomer(tx, {
          phone: input.phone,
          password_hash: passwordHash,
          email: input.email?.toLowerCase() ?? null,
          email_self_asserted: 1,
          first_name: input.first_name ?? null,
          last_name: input.last_name ?? null,
          created_at: now,
        })
      })
    } catch (err) {
      // A concurrent registration of the same phone got in between the check and the insert.
      if (isUniqueViolation(err)) throw new ConflictError('Phone number already registered')
      throw err
    }
    await audit.record({ kind: 'register', actor: `consumer:${id}`, ip, outcome: 'success' })
    return this.deps.tokens.issuePair(consumerGrant({ id, token_generation: 0 }))
  }

  async profile(id: number): Promise<ConsumerView> {
    const c = await getCustomer(this.deps.db, id)
    if (!c) throw new UnauthorizedError()
    return { ...c, identity_providers: await identityIssuers(this.deps.db, id) }
  }

  async updateProfile(id: number, patch: ProfilePatch): Promise<ConsumerView> {
    const current = await getCustomer(this.deps.db, id)
    if (!current) throw new UnauthorizedError()
    const values: Parameters<typeof updateCustomer>[2] = {}
    if (patch.first_name !== undefined) values.first_name = patch.first_name
    if (patch.last_name !== undefined) values.last_name = patch.last_name
    if (patch.email !== undefined) {
      const email = patch.email?.toLowerCase() ?? null
      if (email !== current.email) {
        values.email = email
        values.email_self_asserted = 1
      }
    }
    await updateCustomer(this.deps.db, id, values)
    return this.profile(id)
  }

  /** Waits for SMS deliveries still running (app shutdown). */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.deliveries])
  }
}
